"""The probe server's bounds, over real sockets: how many connections it holds at once, how
long a client may take to send its request, and an accept loop that rests when the process is
out of file descriptors, so that no client of the probe port can cost a rank its files (its
next checkpoint) or a core."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distconv.probe_http import (
    CLIENT_SECONDS,
    MAX_CONNECTIONS,
    SLOT_SECONDS,
    ProbeHTTPServer,
    handler_for,
)
from distconv.service import ServiceEndpoints
from tests.child_env import REPO_ROOT, child_env
from tests.deploy.test_service import get
from tests.processes import job_env

READYZ = b"GET /readyz HTTP/1.0\r\n\r\n"


@contextlib.contextmanager
def serving(service: ServiceEndpoints, **bounds: float) -> Iterator[int]:
    """A :class:`ProbeHTTPServer` for ``service`` with ``bounds`` (``max_connections``,
    ``client_seconds``) on a port of 127.0.0.1 the OS picks, its accept loop on a thread; its
    port. Closed on leaving (its connections hung up on, their threads joined)."""
    server = ProbeHTTPServer(("127.0.0.1", 0), handler_for(service), **bounds)
    loop = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    loop.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        loop.join()
        server.server_close()


def hung_up(client: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``client`` within ``seconds`` (False: still open then)."""
    client.settimeout(seconds)
    try:
        return client.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def handler_threads() -> int:
    """The request threads alive in this process (the stdlib names them by their target)."""
    return sum("process_request" in t.name for t in threading.enumerate())


@pytest.mark.timeout(60)
def test_a_connection_past_the_cap_takes_the_slot_of_the_oldest_idle_one():
    """Each connection held a thread and a file, with no cap: enough idle ones used up the
    process's files. Past the cap the oldest connection still waiting for its request is
    hung up on, so a probe that sends its request at once is answered during the flood."""
    cap = 4
    with serving(ServiceEndpoints(), max_connections=cap, client_seconds=30) as port:
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
        try:
            dropped = [hung_up(client, 5) for client in held[:6]]
            assert dropped == [True] * 6  # the six oldest, in their order
            assert [hung_up(client, 0.2) for client in held[6:]] == [False] * 4
            deadline = time.monotonic() + 5
            while handler_threads() != cap:  # the dropped ones' threads end
                assert time.monotonic() < deadline, f"{handler_threads()} request threads"
                time.sleep(0.02)
            began = time.monotonic()
            assert get(port, "/readyz")[0] == 503  # answered with every slot held by a silent one
            assert time.monotonic() - began < 5  # not by the 30 s deadline of the one dropped
            assert hung_up(held[6], 5) and not hung_up(held[7], 0.2)
        finally:
            for client in held:
                client.close()
        assert get(port, "/readyz")[0] == 503  # and after the flood


@pytest.mark.timeout(60)
def test_a_trickling_client_is_dropped_at_the_deadline():
    """The deadline was a timeout on each read: a client sending a byte every 8 s (under
    10 s) held its connection as long as it liked. It is one deadline from the accept to the
    end of the headers now; a request sent in pieces within it is answered."""
    with serving(ServiceEndpoints(), client_seconds=0.5) as port:
        with socket.create_connection(("127.0.0.1", port)) as slow:
            began = time.monotonic()
            for byte in READYZ[:-2] + b"X-Pad: " + b"a" * 100:  # 10 s of it at this pace
                try:
                    slow.send(bytes([byte]))
                except OSError:
                    break  # reset: the server has hung up
                if hung_up(slow, 0.1):
                    break
            seconds = time.monotonic() - began
        assert 0.45 <= seconds < 3, f"dropped after {seconds:.2f} s, the deadline is 0.5 s"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as pieces:
            pieces.sendall(READYZ[:10])
            time.sleep(0.25)
            pieces.sendall(READYZ[10:])
            assert pieces.recv(64).startswith(b"HTTP/1.0 503")


@pytest.mark.timeout(60)
def test_a_request_being_answered_keeps_its_slot():
    """With every slot holding a request being answered (here: /healthz held until the test
    lets it go), a new connection is not served in place of one: it waits SLOT_SECONDS for a
    slot, then is closed unanswered, and the answers go out whole. The service's health text
    is replaced by one that waits, to hold a handler in its answer."""
    answering, release = threading.Semaphore(0), threading.Event()

    def held_answer() -> str:
        answering.release()
        return "ok\n" if release.wait(20) else "never released\n"

    service = ServiceEndpoints()
    service._health_text = held_answer
    answers: list[tuple[int, str]] = []
    with serving(service, max_connections=2, client_seconds=30) as port:
        asking = [
            threading.Thread(target=lambda: answers.append(get(port, "/healthz"))) for _ in range(2)
        ]
        for thread in asking:
            thread.start()
        for _ in asking:  # both requests read, their answers being made
            assert answering.acquire(timeout=10), "the two requests were never answered"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as late:
            late.sendall(READYZ)
            began = time.monotonic()
            assert late.recv(64) == b""  # closed, no answer
            waited = time.monotonic() - began
        release.set()
        for thread in asking:
            thread.join(10)
    assert SLOT_SECONDS * 0.8 <= waited < SLOT_SECONDS + 3, waited
    assert answers == [(200, "ok\n"), (200, "ok\n")]


# a process whose file descriptors are all taken (its soft limit lowered to its lowest free
# one), with a client waiting to be accepted: how long its threads ran or waited for a core in
# a second (Linux's schedstat, from files opened while files were free), and the CPU they got.
# A thread that spins wants the whole second whatever the host's load; the CPU it gets is what
# other processes leave it, under 0.1 s at times on a loaded host
OUT_OF_FILES = """
import os, resource, sys, time
from distconv.service import ServiceEndpoints
service = ServiceEndpoints()
port = service.start()
tasks = [f"/proc/self/task/{t}/schedstat" for t in os.listdir("/proc/self/task")]
tasks = [os.open(task, os.O_RDONLY) for task in tasks]
def wanted():
    return sum(sum(map(int, os.pread(task, 64, 0).split()[:2])) for task in tasks) / 1e9
limits = resource.getrlimit(resource.RLIMIT_NOFILE)
free = os.open(os.devnull, os.O_RDONLY)
os.close(free)
resource.setrlimit(resource.RLIMIT_NOFILE, (free, limits[1]))
print(port, flush=True)
sys.stdin.readline()  # the parent's client waits in the listen queue, its request sent
time.sleep(0.2)  # the accept loop has met EMFILE
before = wanted(), os.times()
time.sleep(1)
after = wanted(), os.times()
resource.setrlimit(resource.RLIMIT_NOFILE, limits)
cpu = after[1].user + after[1].system - before[1].user - before[1].system
print(after[0] - before[0], cpu, flush=True)
sys.stdin.readline()  # answered
service.close()
"""


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="no Linux schedstat")
@pytest.mark.timeout(60)
def test_the_accept_loop_rests_while_the_process_is_out_of_files():
    """At EMFILE the stdlib's accept loop retried at once, a core busy (and the GIL taken from
    the training) for as long as the shortage lasted: its thread wanted the whole second (it
    got 0.2 to 0.96 s of CPU on this loaded two-core host). With a pause it wants about
    0.01 s; the bound leaves room for a slow host. The waiting client is answered once files
    are free. CPU time alone let the spin pass under a busy loop beside the test."""
    with job_env(child_env()) as env:
        child = subprocess.Popen(
            [sys.executable, "-c", OUT_OF_FILES],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            port = int(child.stdout.readline())  # out of files from now on
            with socket.create_connection(("127.0.0.1", port), timeout=20) as client:
                client.sendall(READYZ)
                child.stdin.write("\n")
                child.stdin.flush()
                wanted, cpu = map(float, child.stdout.readline().split())
                assert wanted < 0.2, (
                    f"wanted a core {wanted:.2f} s of 1 s out of files (CPU {cpu:.2f} s)"
                )
                assert client.recv(64).startswith(b"HTTP/1.0 503")
            child.stdin.write("\n")
            child.stdin.close()
            assert child.wait(20) == 0
        finally:
            child.kill()
            child.wait()


# `distconv train` under a file limit of its first argument, with the rest as its arguments
LIMITED = """
import resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from distconv.cli import main
raise SystemExit(main(sys.argv[2:]))
"""

PORT_LINE = re.compile(r"probes and metrics on port ([0-9]+)")
#: the step /healthz names (``none yet`` before the first: ready, on a loaded machine, before it)
LAST_STEP = re.compile(r"last step (none yet|[0-9]+),")


def _port_logged(log: Path, child: subprocess.Popen, seconds: float) -> int:
    """The probe port ``child`` logged to ``log``, read as soon as it is there."""
    deadline = time.monotonic() + seconds
    while not (found := PORT_LINE.search(log.read_text())):
        assert child.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "no port logged"
        time.sleep(0.02)
    return int(found.group(1))


@pytest.mark.timeout(120)
def test_a_rank_flooded_on_its_probe_port_checkpoints_and_answers(tmp_path):
    """``distconv train`` under a file limit of 64 (a container's 1024, scaled down: the rank
    itself uses a handful) got 100 idle connections on --health-port: each took a file, the
    rank failed at its next checkpoint ("too many open files"), and the kubelet's probe
    waited in the listen queue, never accepted. Now the rank answers /healthz during the
    flood and checkpoints past the step it named then, the flood held to its end."""
    limit, run, log = 64, tmp_path / "run", tmp_path / "train.log"
    argv = [sys.executable, "-c", LIMITED, str(limit), "train", "--data", "synthetic",
            "--epochs", "8", "--checkpoint-every", "10", "--no-progress", "--out", str(run),
            "--health-port", "0"]  # fmt: skip
    with job_env(child_env(OMP_NUM_THREADS="1")) as env, log.open("w") as out:
        child = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        held: list[socket.socket] = []
        try:
            port = _port_logged(log, child, 60)
            while get(port, "/readyz")[0] != 200:
                time.sleep(0.02)
            held = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
            status, body = get(port, "/healthz")
            assert status == 200, body
            said = LAST_STEP.search(body)
            assert said is not None, body
            flooded_at = -1 if said.group(1) == "none yet" else int(said.group(1))
            assert child.wait(60) == 0, log.read_text()
        finally:
            for client in held:
                client.close()
            child.kill()
            child.wait()
    steps = [int(p.name[len("step-") :]) for p in (run / "checkpoints").glob("step-*[0-9]")]
    assert flooded_at < 192 and max(steps) == 192, (flooded_at, steps)  # 8 epochs of 24 steps


def test_the_operations_guide_states_the_bounds():
    """docs/operations.md tells an operator the cap and the deadline: the numbers it gives are
    the module's."""
    text = " ".join((REPO_ROOT / "docs" / "operations.md").read_text().split())
    assert f"serves at most {MAX_CONNECTIONS} connections at once" in text
    assert f"Past {MAX_CONNECTIONS}, a new connection takes the place" in text
    assert f"within {CLIENT_SECONDS:g} s of connecting (`CLIENT_SECONDS`)" in text


@pytest.mark.parametrize("cap", [0, -1, 2.5])
def test_a_cap_below_one_connection_is_refused(cap):
    with pytest.raises(ValueError, match=f"max_connections must be an integer >= 1, got {cap}"):
        ProbeHTTPServer(("127.0.0.1", 0), handler_for(ServiceEndpoints()), max_connections=cap)


def _somaxconn() -> int:
    """The kernel's cap on a listening socket's queue (Linux; 4096 since 5.4)."""
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        return 0


@pytest.mark.skipif(_somaxconn() < 1024, reason="the kernel caps the listen queue below 1024")
@pytest.mark.timeout(60)
def test_a_probe_behind_a_burst_of_idle_connections_gets_in_and_is_answered():
    """Past the cap, each connection accepted waits for the one it displaces to end, so a
    flood of idle clients, each reconnecting when hung up on, keeps the listen queue as long
    as the flood less the cap. A queue of 128 overflowed at about 160 such clients: the
    kernel dropped the kubelet's SYN too, its connect retried after 1 s and 3 s, and probes
    failed at timeoutSeconds 5 while the flood lasted. Here 600 idle connections wait to be
    accepted (the accept loop not yet running): each connects at once, and a probe sent
    after them is answered."""
    service = ServiceEndpoints()
    server = ProbeHTTPServer(("127.0.0.1", 0), handler_for(service), client_seconds=30)
    port = server.server_address[1]
    held: list[socket.socket] = []
    loop = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    try:
        for _ in range(600):  # a SYN the kernel drops is retried after 1 s: a timeout here
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=0.5))
            except TimeoutError:
                pytest.fail(f"the kernel dropped connection {len(held) + 1}: the queue is full")
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as probe:
            probe.sendall(READYZ)
            began = time.monotonic()
            loop.start()
            probe.settimeout(5)
            assert probe.recv(64).startswith(b"HTTP/1.0 503")
            assert time.monotonic() - began < 5
    finally:
        for client in held:
            client.close()
        if loop.is_alive():
            server.shutdown()
            loop.join()
        server.server_close()
