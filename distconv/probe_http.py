"""The HTTP side of a rank's probes and metrics: the server and its request handler.

:class:`~distconv.service.ServiceEndpoints` holds what the probes report; this module answers
``GET``/``HEAD`` for ``/readyz``, ``/healthz`` and ``/metrics`` from it, one daemon thread per
connection, without letting a slow, silent or vanished client cost the training anything: at
most :data:`MAX_CONNECTIONS` connections at a time, each with :data:`CLIENT_SECONDS` to send
its whole request, and an accept loop that rests when the process is out of file descriptors.
"""

from __future__ import annotations

import errno
import logging
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from distconv.service import ServiceEndpoints

log = logging.getLogger("distconv.service")

#: seconds a client may take to send its whole request, from its connection's accept to the
#: end of its headers (a client trickling a byte at a time is dropped at this deadline too),
#: and to take each piece of the answer; a connection idle longer would hold its thread and
#: socket for the process's life
CLIENT_SECONDS = 10.0

#: connections served at once. Each holds a thread and a file descriptor: without a cap a
#: thousand idle connections (a port scan, a stuck scraper) used up a container's 1024 files,
#: and the rank's next checkpoint failed. A kubelet, a Prometheus or two and an operator's
#: curl need a few; the slots past them absorb a burst of scrapes
MAX_CONNECTIONS = 32

#: seconds a new connection waits for a slot when every one holds a request being answered
#: (none to drop), before it is closed unanswered
SLOT_SECONDS = 1.0

#: seconds the accept loop rests after accept() failed for want of a file descriptor (or of
#: kernel memory): the listening socket stays readable, and the stdlib retried at once, a
#: core busy (and the GIL contended with the training) for as long as the shortage lasted
ACCEPT_PAUSE = 0.1

#: accept()'s errors that say the process or the host is short of a resource, not that the
#: one connection failed
_SHORTAGES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


@dataclass
class _Connection:
    """A connection being served: its thread, and until its request is read, its deadline."""

    thread: threading.Thread
    deadline: float  # time.monotonic() by which the request's headers must be in
    reading: bool = True  # its request is not read yet: it may be dropped


class ProbeHTTPServer(ThreadingHTTPServer):
    """The stdlib's threading server, bounded: at most ``max_connections`` connections at a
    time (:data:`MAX_CONNECTIONS`), each dropped unless its request is in within
    ``client_seconds`` of its accept (:data:`CLIENT_SECONDS`, read when the server is made),
    and an accept loop that pauses :data:`ACCEPT_PAUSE` when the process is out of files.

    A connection past the cap takes the slot of the oldest one still waiting for its request
    (that one is hung up on): a flood of idle connections then cannot keep the kubelet's
    probe, which sends its request at once, from being answered, whereas closing the new
    connection would fail the probe for as long as the flood held the slots, and the liveness
    probe would restart a healthy rank. Only when every slot holds a request being answered
    does the new connection wait, :data:`SLOT_SECONDS` at most, then get closed.

    Without the stdlib's traceback on stderr for a client that hung up: a probe past its
    ``timeoutSeconds`` is no error of this rank's, and stderr may be a JSON log
    (``--log-format json``) that bare lines would break."""

    daemon_threads = True  # a request in flight keeps no process alive
    # connections the kernel holds while the accept loop catches up (capped by the kernel's
    # net.core.somaxconn, 4096 on Linux since 5.4): the stdlib's 5 reset a burst of scrapes
    # (a Prometheus fleet and the kubelet's probes at one moment). Past the cap each accept
    # waits for the connection it displaces to end, so idle clients that reconnect when hung
    # up on keep as many connections queued as they are, less the cap; at 128 the queue was
    # full at about 160 such clients, and the kernel dropped the kubelet's SYN with theirs
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        max_connections: int = MAX_CONNECTIONS,
        client_seconds: float | None = None,
    ) -> None:
        if not (isinstance(max_connections, int) and max_connections >= 1):
            raise ValueError(f"max_connections must be an integer >= 1, got {max_connections!r}")
        self.max_connections = max_connections
        # None: the module's value when the server is made (a test may lower it)
        self.client_seconds = CLIENT_SECONDS if client_seconds is None else float(client_seconds)
        self._slots = threading.BoundedSemaphore(max_connections)
        # the connections served, oldest first (server_close() joins no daemon thread: a
        # silent client kept both up to CLIENT_SECONDS); first, as a failed bind closes.
        # A socket in it is not closed yet (shutdown_request() takes it out first), so one
        # shut down under the lock is never a descriptor reused meanwhile by another file
        self._open: dict[socket.socket, _Connection] = {}
        self._open_lock = threading.Lock()
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)

    def server_bind(self) -> None:  # "::" takes IPv4 clients too, whatever bindv6only says
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as exc:  # the caller skips it; the pause keeps the loop from spinning
            if exc.errno in _SHORTAGES:
                time.sleep(ACCEPT_PAUSE)
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._drop_oldest_waiting()
            if not self._slots.acquire(timeout=SLOT_SECONDS):
                super().shutdown_request(request)  # no slot of its own to give back
                return
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self._open_lock:
            self._open[request] = _Connection(thread, time.monotonic() + self.client_seconds)
        thread.start()

    def request_read(self, request: socket.socket) -> None:
        """The handler has read the request's headers: its deadline is met, and the
        connection is no longer one to drop for a new one."""
        with self._open_lock:
            served = self._open.get(request)
            if served is not None:
                served.reading = False

    def service_actions(self) -> None:
        """Hang up on each connection past its deadline with its request still unread (the
        accept loop calls this every ``poll_interval`` and after each connection)."""
        now = time.monotonic()
        with self._open_lock:
            for request, served in self._open.items():
                if served.reading and served.deadline <= now:
                    self._hang_up(request, served)

    def _drop_oldest_waiting(self) -> None:
        """Hang up on the connection that has waited longest for its request, if any: its
        thread then ends, and gives its slot back."""
        with self._open_lock:
            for request, served in self._open.items():  # oldest first
                if served.reading:
                    self._hang_up(request, served)
                    return

    @staticmethod
    def _hang_up(request: socket.socket, served: _Connection) -> None:
        """Shut ``request`` down (its handler's read returns at once); under the lock."""
        served.reading = False
        try:
            request.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # the client hung up first

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            served = self._open.pop(request, None)
        super().shutdown_request(request)
        if served is not None:
            self._slots.release()

    def server_close(self) -> None:
        """Release the port, then hang up on every connection still served and wait for its
        thread (a handler blocked reading or writing returns at once)."""
        super().server_close()
        with self._open_lock:
            open_now = list(self._open.items())
            for request, served in open_now:
                self._hang_up(request, served)
        for _, served in open_now:
            served.thread.join(self.client_seconds)

    def handle_error(self, request: object, client_address: tuple) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return  # the client is gone, or too slow: nobody to tell
        log.error("probes and metrics: a request from %s failed", client_address[0], exc_info=True)


def _target_path(target: str) -> str:
    """The path a request's target names, its query cut: from the absolute form too ("GET
    http://host:9100/healthz"), which a proxy sends and RFC 9112 3.2.2 says a server MUST
    accept; a target the URL parser refuses ("http://[::1/healthz") names no path (404)."""
    if "://" in target.split("?", 1)[0]:
        try:
            target = urlsplit(target).path
        except ValueError:
            return ""
    return target.split("?", 1)[0]


def handler_for(service: ServiceEndpoints) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``service`` (the stdlib server wants a class)."""

    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            # the socket's timeout, for each read and write: a client that stops reading the
            # answer is dropped too (the server's deadline covers the request alone)
            self.timeout = self.server.client_seconds
            super().setup()

        def parse_request(self) -> bool:
            parsed = super().parse_request()  # the request line and the headers are in
            self.server.request_read(self.connection)
            return parsed

        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            path = _target_path(self.path)
            if path == "/readyz":
                ok = service.ready
                self._reply(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
            elif path == "/healthz":  # one reading of the clock: the status is the text's
                text = service._health_text()
                self._reply(200 if text.startswith("ok") else 503, text.encode())
            elif path == "/metrics":
                self._reply(200, generate_latest(service.registry), CONTENT_TYPE_LATEST)
            else:
                self._reply(404, b"not found: try /readyz, /healthz or /metrics\n")

        do_HEAD = do_GET  # noqa: N815 (HTTP servers must answer HEAD as GET, without the body)

        def _reply(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8"):
            self.send_response(HTTPStatus(status))
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # probes arrive every few seconds; logging each would drown the training log

    return Handler
