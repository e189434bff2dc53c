"""The probes on IPv6, and ``/healthz``'s status agreeing with its text: real HTTP on port 0."""

from __future__ import annotations

import itertools
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from distconv.service import ServiceEndpoints
from tests.child_env import child_env
from tests.probes import has_ipv6_loopback

needs_ipv6 = pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback here")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@needs_ipv6
@pytest.mark.timeout(30)
@pytest.mark.parametrize("host", ["::1", "[::1]"])
def test_the_probes_bind_an_ipv6_literal(host):
    """``--health-host ::1`` bound an IPv4 socket and failed ("Address family for hostname
    not supported"); brackets, as in a URL, are taken too."""
    with ServiceEndpoints(role="worker", rank=0) as svc:
        port = svc.start(host)
        assert get(f"http://[::1]:{port}/readyz") == (503, "not ready\n")
        svc.set_ready()
        assert get(f"http://[::1]:{port}/readyz") == (200, "ready\n")


@needs_ipv6
@pytest.mark.timeout(30)
def test_probes_on_the_ipv6_wildcard_answer_ipv4_clients_too():
    """``--health-host ::`` in a pod of an IPv6 (or dual-stack) cluster: the kubelet may come
    by either family."""
    with ServiceEndpoints(role="pserver", rank=1) as svc:
        port = svc.start("::")
        svc.beat(3)
        for url in (f"http://[::1]:{port}/healthz", f"http://127.0.0.1:{port}/healthz"):
            status, body = get(url)
            assert status == 200 and body.startswith("ok: pserver 1, last step 3"), (url, body)


@pytest.mark.timeout(30)
def test_healthz_status_is_the_one_its_text_gives_across_the_stall_limit():
    """Status and text read the time since the last beat once: read twice, a probe at the
    limit got 200 with a "stalled" body. Each reading here is 0.2 s later than
    the one before, so two readings in one answer always straddle the 1 s limit once."""
    with ServiceEndpoints(role="worker", rank=2, stall_seconds=1.0) as svc:
        port = svc.start()
        svc.beat(5)
        clock = itertools.count(0.1, 0.2)  # 0.1, 0.3, ... 0.9, 1.1, ...
        svc._seconds_since_beat = lambda: next(clock)
        answers = [get(f"http://127.0.0.1:{port}/healthz") for _ in range(8)]
    for status, body in answers:
        assert (status == 200) == body.startswith("ok:"), answers
    assert answers[0][0] == 200 and answers[-1][0] == 503, answers


@needs_ipv6
@pytest.mark.timeout(60)
def test_a_shard_on_ipv6_says_where_its_probes_and_socket_are_as_urls_write_them():
    """``distconv pserver`` on ``[::1]``: its lines name ``[::1]:PORT`` (not ``::1:PORT``, whose
    port no reader can tell), and the probes they name answer."""
    shard = subprocess.Popen(
        [sys.executable, "-m", "distconv", "pserver", "--bind", "[::1]:0", "--shard", "0",
         "--num-shards", "1", "--workers", "1", "--insecure", "--drain-seconds", "0",
         "--health-port", "0", "--health-host", "::1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=child_env(OMP_NUM_THREADS="1"),
    )  # fmt: skip
    try:
        listening = shard.stdout.readline()
        probes = shard.stderr.readline()
        assert listening.startswith("pserver shard 0 listening on [::1]:"), listening
        assert probes.startswith("pserver shard 0 probes on [::1]:"), probes
        status, body = get(f"http://{probes.split()[-1]}/healthz")
        assert status == 200 and body.startswith("ok: server 0"), body
    finally:
        shard.terminate()
        shard.communicate(timeout=20)


class _V6OnlyByDefault(socket.socket):
    """A socket as a host with ``net.ipv6.bindv6only = 1`` makes them: IPv6 ones take no
    IPv4 peer unless told."""

    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):  # noqa: A002
        super().__init__(family, type, proto, fileno)
        if fileno is None and self.family == socket.AF_INET6:
            self.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)


@needs_ipv6
@pytest.mark.timeout(30)
def test_probes_on_the_ipv6_wildcard_take_ipv4_clients_whatever_bindv6only_says(monkeypatch):
    """``--health-host ::`` answered IPv4 clients only where the host's default lets an IPv6
    socket take them (Linux's ``bindv6only`` 0); with 1, an IPv4 kubelet was refused."""
    monkeypatch.setattr(socket, "socket", _V6OnlyByDefault)
    with ServiceEndpoints(role="worker", rank=0) as svc:
        port = svc.start("::")
        assert get(f"http://127.0.0.1:{port}/readyz") == (503, "not ready\n")
