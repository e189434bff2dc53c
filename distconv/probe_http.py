"""The HTTP side of a rank's probes and metrics: the server and its request handler.

:class:`~distconv.service.ServiceEndpoints` holds what the probes report; this module answers
``GET``/``HEAD`` for ``/readyz``, ``/healthz`` and ``/metrics`` from it, one daemon thread per
connection, without letting a slow, silent or vanished client cost the training anything.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from distconv.service import ServiceEndpoints

log = logging.getLogger("distconv.service")

#: seconds a client may take to send its request or to read the answer; a connection idle
#: longer would hold its thread and socket for the process's life
CLIENT_SECONDS = 10.0


class ProbeHTTPServer(ThreadingHTTPServer):
    """The stdlib's threading server, without its traceback on stderr for a client that hung
    up: a probe past its ``timeoutSeconds`` is no error of this rank's, and stderr may be a
    JSON log (``--log-format json``) that bare lines would break."""

    daemon_threads = True  # a request in flight keeps no process alive
    # connections the kernel holds while the accept loop catches up: the stdlib's 5 reset a
    # burst of scrapes (a Prometheus fleet and the kubelet's probes at one moment)
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        # the connections served, with their threads (server_close() joins no daemon thread:
        # a silent client kept both up to CLIENT_SECONDS); first, as a failed bind closes
        self._open: dict[socket.socket, threading.Thread] = {}
        self._open_lock = threading.Lock()
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)

    def server_bind(self) -> None:  # "::" takes IPv4 clients too, whatever bindv6only says
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self._open_lock:
            self._open[request] = thread
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def server_close(self) -> None:
        """Release the port, then hang up on every connection still served and wait for its
        thread (a handler blocked reading or writing returns at once)."""
        super().server_close()
        with self._open_lock:
            open_now = list(self._open.items())
        for request, _ in open_now:
            try:
                request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # the client hung up first
        for _, thread in open_now:
            thread.join(CLIENT_SECONDS)

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
        timeout = CLIENT_SECONDS  # the socket's: a silent client is dropped, not waited for

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
