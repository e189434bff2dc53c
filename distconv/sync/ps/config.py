"""A shard's settings and the ``HOST:PORT`` addresses shards and workers share."""

from __future__ import annotations

import functools
import ipaddress
import math
import os
import socket as pysocket
from dataclasses import dataclass

from distconv.endpoint import join_endpoint, split_endpoint
from distconv.runtime import DEFAULT_JOB_ID
from distconv.sync.base import SyncError
from distconv.sync.ps.limits import DEFAULT_MAX_STALENESS, MAX_SETTING  # the launcher's too
from distconv.sync.ps.wire import MAX_FRAME_BYTES, MAX_MESSAGE_BYTES

#: the shortest ``--timeout``, in seconds: workers beat four times per timeout, at most every
#: 50 ms (see :mod:`.beats`), so a shorter one would declare beating ranks lost
MIN_TIMEOUT = 0.2
#: the largest file descriptor (a C int) that ``--bind-fd`` may name
MAX_FD = 2**31 - 1
#: the most workers a job may declare (``--workers`` of a shard and of ``distconv keys``): a
#: shard checks its declared ranks ten times a second, and 100000000 (a slip of the finger)
#: took it 3.5 GB and a core before any worker came; ``distconv keys`` writes two files a rank
MAX_WORKERS = 2**16
#: seconds a shard goes on serving after SIGTERM while workers are still in: inside the
#: 120 s that Kubernetes gives a pod, so a worker stopped by the same eviction checkpoints
DRAIN_SECONDS = 90.0


@dataclass
class ShardConfig:
    """A shard's settings (the ``distconv pserver`` flags).

    Attributes:
        bind: ``HOST:PORT``; port 0 picks a free port (printed and logged).
        shard: this shard's index, ``0 <= shard < num_shards``.
        num_shards: how many shards the job has.
        workers: how many workers the job has.
        mode: ``"sync"`` or ``"async"``.
        max_staleness: async only: the most updates a pushed block may lag behind.
        timeout: seconds any wait may take before the missing worker is named.
        on_worker_loss: async only: ``"fail"`` or ``"continue"`` without a silent worker.
        keys_dir: directory of the job's CURVE key files; None with ``insecure``.
        insecure: no encryption, no authentication (local experiments only).
        checkpoint_dir: where this shard writes its checkpoint parts.
        keep_parts: parts kept when a checkpoint request names no ``keep`` (0: all).
        job_id: the job every request must name ("" accepts the empty id only).
        max_message_bytes: largest array payload of one message (bounds what the shard
            processes; ZeroMQ has received the whole message by then).
        max_frame_bytes: largest array frame (with the cap, the smaller): ZeroMQ closes a
            connection whose frame is larger before buffering it, so this bounds memory per frame.
        drain_seconds: after the first SIGTERM, the longest the shard goes on serving
            workers that have not said ``bye`` (0: stop at once).
        bind_fd: a TCP socket already listening on ``bind``'s port, inherited as this file
            descriptor, which the shard serves on instead of binding (``distconv-launch
            local`` reserves its shards' ports so: no process can take one first); None binds.
    """

    bind: str
    shard: int = 0
    num_shards: int = 1
    workers: int = 1
    mode: str = "sync"
    max_staleness: int = DEFAULT_MAX_STALENESS
    timeout: float = 60.0
    on_worker_loss: str = "fail"
    keys_dir: str | None = None
    insecure: bool = False
    checkpoint_dir: str | None = None
    keep_parts: int = 3
    job_id: str = DEFAULT_JOB_ID
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_frame_bytes: int = MAX_FRAME_BYTES
    drain_seconds: float = DRAIN_SECONDS
    bind_fd: int | None = None

    def check(self) -> None:
        """Raise ValueError naming the first bad setting."""
        if not (0 <= self.shard < self.num_shards):
            raise ValueError(
                f"need 0 <= --shard < --num-shards, got {self.shard}, {self.num_shards}"
            )
        check_workers(self.workers)
        if self.mode not in ("sync", "async"):
            raise ValueError(f"--mode must be sync or async, got {self.mode!r}")
        if self.on_worker_loss not in ("fail", "continue"):
            raise ValueError(
                f"--on-worker-loss must be fail or continue, got {self.on_worker_loss!r}"
            )
        if self.on_worker_loss == "continue" and self.mode == "sync":
            # read by async mode alone: a sync step needs every rank's push, so a lost worker
            # failed the job all the same, where the flag said it would go on
            raise ValueError(
                "--on-worker-loss continue needs --mode async: a sync step waits for every "
                "worker's push, so losing one fails the job whatever this flag says"
            )
        if self.keep_parts < 0:
            raise ValueError(f"--keep-parts must be >= 0, got {self.keep_parts}")
        if self.max_message_bytes < 1 or self.max_frame_bytes < 1:
            raise ValueError("--max-message-bytes and --max-frame-bytes must be >= 1")
        if self.max_staleness < 0:
            raise ValueError(f"--max-staleness must be >= 0, got {self.max_staleness}")
        counts = {
            "--num-shards": self.num_shards,
            "--max-staleness": self.max_staleness,
            "--max-message-bytes": self.max_message_bytes,
            "--max-frame-bytes": self.max_frame_bytes,
        }
        for flag, count in counts.items():
            if count > MAX_SETTING:  # told to the workers in hello, which msgpack must carry
                raise ValueError(f"{flag} must be at most {MAX_SETTING} (2**63 - 1), got {count}")
        if not MIN_TIMEOUT <= self.timeout < math.inf:
            raise ValueError(f"--timeout must be finite and >= {MIN_TIMEOUT}, got {self.timeout}")
        if not 0 <= self.drain_seconds < math.inf:
            raise ValueError(f"--drain-seconds must be finite and >= 0, got {self.drain_seconds}")
        if not self.insecure and not self.keys_dir:
            raise ValueError("CURVE is on by default: pass --keys DIR, or --insecure to opt out")
        if self.bind_fd is not None and not 0 <= self.bind_fd <= MAX_FD:
            # a C int: -1 stopped the shard with a traceback, 2**32 + 3 too (past the check of
            # fd 3, which the socket module wrapped to it, ZeroMQ refused the number)
            raise ValueError(
                f"--bind-fd must be a file descriptor, 0..{MAX_FD}, got {self.bind_fd}"
            )
        split_endpoint(self.bind)


def check_workers(workers: int) -> None:
    """Raise ValueError unless ``workers`` is a job's worker count, 1..:data:`MAX_WORKERS`."""
    if not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"--workers must be 1..{MAX_WORKERS}, got {workers}")


def listening_fd(fd: int, host: str, port: int) -> int:
    """``fd``, checked to be a TCP socket listening on ``host``'s address and ``port`` (any
    port for 0), as ``--bind-fd`` promises: ZeroMQ would take any descriptor, and fail later
    or serve on another address or port than the workers were told (the shard names
    ``--bind``'s host as its endpoint). A host that is no IP address (a name, an interface)
    is not compared: the port is.

    Raises:
        OSError: naming what the descriptor is instead.
    """
    try:
        sock = pysocket.socket(fileno=fd)
    except OSError as exc:
        raise OSError(f"--bind-fd {fd}: not an open socket ({exc.strerror})") from None
    try:
        stream = sock.family in (pysocket.AF_INET, pysocket.AF_INET6)
        stream = stream and sock.type == pysocket.SOCK_STREAM
        listening = stream and sock.getsockopt(pysocket.SOL_SOCKET, pysocket.SO_ACCEPTCONN)
        name = sock.getsockname() if stream else (None, None)
    finally:
        sock.detach()  # the descriptor stays open: ZeroMQ serves on it
    address, bound = name[:2]
    if len(name) == 4 and name[3]:  # an IPv6 socket on a link-local address: its interface
        address = f"{address}%{name[3]}"
    if not listening or port not in (0, bound):
        raise OSError(
            f"--bind-fd {fd}: not a TCP socket listening on port {port} "
            f"({'listening' if listening else 'not listening'}, port {bound})"
        )
    if not _same_address(host, address):
        raise OSError(
            f"--bind-fd {fd}: listening on {join_endpoint(address, bound)}, not on --bind's "
            f"host {host}"
        )
    return fd


def _same_address(host: str, address: str) -> bool:
    """Whether a socket bound to ``address`` is on ``host`` (``*``: either family's
    wildcard); True for a host that is no IP address, which is not judged here."""
    if host == "*":
        return address in ("0.0.0.0", "::")
    host, _, zone = host.partition("%")
    try:
        want = ipaddress.ip_address(host)
    except ValueError:  # a name or an interface: ZeroMQ would resolve it; only the port counts
        return True
    address, _, scope = address.partition("%")
    if ipaddress.ip_address(address) != want:
        return False
    # a link-local address names its interface by name or by index (fe80::1%eth0, %2), and the
    # socket says the index: compared as written, fe80::1%eth0 was refused on its own socket
    return not zone or _interface_index(zone) == int(scope or 0)


def _interface_index(zone: str) -> int | None:
    """The index of interface ``zone`` (a name or a number); None where no interface has that
    name here."""
    if zone.isdigit():
        return int(zone)
    try:
        return pysocket.if_nametoindex(zone)
    except OSError:
        return None


def tcp_url(host: str, port: int | str) -> str:
    """The ZeroMQ endpoint ``tcp://HOST:PORT``."""
    return f"tcp://{join_endpoint(host, port)}"


def uses_ipv6(host: str) -> bool:
    """Whether a ZeroMQ socket for ``host`` needs its ``IPV6`` option. Without it ZeroMQ reads
    ``[::1]`` as an interface name ("No such device") and resolves names to IPv4 only, which
    an IPv6-only cluster's names have none of.

    So: an IPv6 literal needs it, and so does a name that has IPv6 addresses and no IPv4 one
    when asked. Everything else keeps ZeroMQ's IPv4 default, as before IPv6 came: IPv4
    literals, the wildcard, a name with an IPv4 address (with the option, ``localhost`` would
    resolve to ``::1`` alone and miss a shard bound to 127.0.0.1), an interface's name
    (``--bind eth0:5555``: with the option ZeroMQ binds its IPv6 address alone), and a name
    that does not resolve yet (a shard's pod not scheduled: an IPv6-only cluster's worker then
    gets no answer, fails, and its restart finds the name)."""
    if ":" in host:
        return True
    if host in ("*", "") or _resolves(host, pysocket.AF_INET):
        return False
    return _resolves(host, pysocket.AF_INET6)


def is_interface(host: str) -> bool:
    """Whether ``host`` names a network interface of this host (``eth0``, ``lo``), which a
    ZeroMQ bind reads before any host name, and binds that interface's address."""
    try:
        return host in {name for _, name in pysocket.if_nameindex()}
    except OSError:  # no interface list (a platform without it)
        return False


def _resolves(host: str, family: int) -> bool:
    try:
        return bool(pysocket.getaddrinfo(host, None, family, pysocket.SOCK_STREAM))
    except (OSError, UnicodeError):  # no such name (yet), or one IDNA cannot encode
        return False


def usable_here(endpoints: list[str]) -> list[str]:
    """``endpoints`` (as :func:`join_endpoint` writes them), or SyncError where one is an IPv6
    literal and this host has no IPv6: ZeroMQ cannot open its socket, and retries without a
    word, so a worker waited out its timeout and said only that the shard never answered."""
    literals = [e for e in endpoints if e.startswith("[")]
    if literals and not host_has_ipv6():
        raise SyncError(f"pserver {literals[0]} is an IPv6 address, but this host has no IPv6")
    return endpoints


#: the longest ``host`` a hello may carry (a DNS name has at most 253 characters): every later
#: message naming the rank quotes it, and a MiB one filled each failure reply of the job
HOST_CHARS = 255


@functools.cache
def host_has_ipv6() -> bool:
    """Whether this host can open IPv6 sockets (a kernel booted with ipv6.disable=1 cannot)."""
    try:
        pysocket.socket(pysocket.AF_INET6, pysocket.SOCK_STREAM).close()
        return True
    except OSError:
        return False


def hostname() -> str:
    """This machine's name, as workers report it to the shards: ``HOSTNAME`` without the
    whitespace around it (an env file of CRLF lines sets ``node1\\r``, and a shard refuses a
    host that is not printable), else, where that is empty or no host name (over
    :data:`HOST_CHARS` characters, or not printable), the system's."""
    name = os.environ.get("HOSTNAME", "").strip()
    if name and len(name) <= HOST_CHARS and name.isprintable():
        return name
    return pysocket.gethostname()
