"""Shards and workers over IPv6: an address ``--bind`` and ``--pservers`` accept (``[::1]:0``)
binds and connects, instead of ZeroMQ reading ``[::1]`` as an interface name ("No such
device"). Real shard processes on the loopback; skipped where this host has no IPv6."""

from __future__ import annotations

import socket

import numpy as np
import pytest
from ps_helpers import (
    assert_equals_local_training,
    batches,
    insecure_worker,
    run_ranks,
    small_net,
    train_steps,
)

from distconv.endpoint import join_endpoint, split_endpoint
from distconv.sync.ps.config import (
    ShardConfig,
    tcp_url,
    uses_ipv6,
)
from distconv.sync.ps.server import Shard
from tests.probes import has_ipv6_loopback, held_port

BATCH = 8


needs_ipv6 = pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback here")


def _train_two_workers(endpoints: list[list[str]], data) -> list:
    """Two workers train ``data``, rank r through ``endpoints[r]``; their networks."""
    nets = [small_net(seed=rank) for rank in range(2)]  # rank 1 must pull rank 0's values

    def rank_fn(rank: int):
        sync = insecure_worker(endpoints[rank], rank, 2)
        try:
            sync.setup(nets[rank].parameters(), {"batch": BATCH})
            train_steps(nets[rank], sync, data, rank, 2)
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
    return nets


@needs_ipv6
def test_two_workers_through_shards_on_the_ipv6_loopback_equal_one_process(shards):
    endpoints = shards.start(2, workers=2, extra=("--bind", "[::1]:0"))
    # what a shard prints is what --pservers reads back: the literal in brackets
    assert all(e.startswith("[::1]:") for e in endpoints), endpoints
    data = batches(3, BATCH)
    nets = _train_two_workers([endpoints, endpoints], data)
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        np.testing.assert_array_equal(p.value, q.value)
    assert_equals_local_training(nets[0], data)


@needs_ipv6
def test_a_shard_on_the_ipv6_wildcard_serves_ipv4_workers_too(shards):
    (endpoint,) = shards.start(1, workers=2, extra=("--bind", "[::]:0"))
    port = split_endpoint(endpoint)[1]
    # one worker by IPv6, the other by IPv4: [::] with ZeroMQ's IPV6 option is dual-stack
    data = batches(2, BATCH)
    nets = _train_two_workers([[f"[::1]:{port}"], [f"127.0.0.1:{port}"]], data)
    assert_equals_local_training(nets[1], data)


def test_which_hosts_need_zeromq_ipv6_option():
    assert uses_ipv6("::1") and uses_ipv6("::") and uses_ipv6("fe80::1%eth0")
    # IPv4 literals, the wildcard and a name with an IPv4 address keep ZeroMQ's default:
    # with the option, localhost would resolve to ::1 only where /etc/hosts lists it
    assert not uses_ipv6("127.0.0.1") and not uses_ipv6("0.0.0.0") and not uses_ipv6("*")
    assert not uses_ipv6("localhost")
    # no address yet (a shard's pod not scheduled): IPv4, as before IPv6 came
    # (IPv6 there moved every default IPv4 Kubernetes job onto IPv6 sockets)
    assert not uses_ipv6("no-such-host.invalid")
    assert join_endpoint("::1", 5) == "[::1]:5" and join_endpoint("h", 5) == "h:5"
    assert tcp_url("::", "*") == "tcp://[::]:*" and tcp_url("10.0.0.1", 7) == "tcp://10.0.0.1:7"
    assert split_endpoint(join_endpoint("::1", 5)) == ("::1", 5)


def _interface_names() -> set[str]:
    try:
        return {name for _, name in socket.if_nameindex()}
    except OSError:
        return set()


@pytest.mark.skipif("lo" not in _interface_names(), reason="no interface named lo here")
@pytest.mark.timeout(30)
def test_a_shard_bound_to_an_interface_name_keeps_listening_on_ipv4():
    """``--bind lo:0`` (an interface, as ZeroMQ reads a bound name first) listened on
    127.0.0.1 before IPv6 came; with ZeroMQ's IPV6 option set for a name that does not
    resolve, it took lo's ``::1`` alone and IPv4 workers were refused (eth0: its IPv6 address,
    or "No such device" where it has none)."""
    shard = Shard(ShardConfig(bind="lo:0", insecure=True))
    try:
        endpoint = shard.bind()
        assert shard._sock.last_endpoint.decode().startswith("tcp://127.0.0.1:"), endpoint
    finally:
        shard.close()


@pytest.mark.skipif("lo" not in _interface_names(), reason="no interface named lo here")
@pytest.mark.timeout(60)
def test_a_shard_bound_to_an_interface_prints_the_address_a_worker_dials(shards):
    """``--bind lo:0`` printed ``listening on lo:PORT``, which no worker can dial (``lo`` is no
    host name): a worker given it waited out its timeout for a hello no shard could receive.
    The shard now prints the interface's address, as the protocol says callers read it."""
    (endpoint,) = shards.start(1, workers=1, extra=("--bind", "lo:0"))
    assert endpoint.startswith("127.0.0.1:"), endpoint
    data = batches(1, BATCH)
    net = small_net()
    sync = insecure_worker([endpoint], timeout=5)
    try:
        sync.setup(net.parameters(), {"batch": BATCH})
        train_steps(net, sync, data)
    finally:
        sync.close()
    assert_equals_local_training(net, data)


@pytest.mark.parametrize("text", ["::1", "fd00::2", "::1:80", "fd00::7:5555"])
def test_an_ipv6_host_without_brackets_is_refused_as_check_address_does(text):
    """``--bind ::1`` (no port) was read as host ``:`` port 1, ``fd00::2`` as ``fd00:`` port 2,
    and ZeroMQ then said "No such device"; ``::1:80`` is ambiguous. ``--pservers`` (runtime's
    check_address) refuses all of them; the shard's ``--bind`` and ``PServerSync`` now do too."""
    with pytest.raises(ValueError, match=r"IPv6 host in brackets \(\[::1\]:80\)"):
        ShardConfig(bind=text, insecure=True).check()
    with pytest.raises(ValueError, match="in brackets"):
        insecure_worker([text])


@pytest.mark.timeout(30)
def test_a_worker_given_an_ipv6_literal_on_a_host_without_ipv6_says_so_at_once(monkeypatch):
    """Without IPv6 (a kernel booted with ipv6.disable=1) ZeroMQ cannot open the socket and
    retries in silence: the worker waited out its timeout, then blamed a shard that never
    answered. Names are not refused: they may resolve to IPv4."""
    from distconv.sync.base import SyncError
    from distconv.sync.ps import config

    monkeypatch.setattr(config, "host_has_ipv6", lambda: False)
    # not 5555, the shards' default, which a real shard on this host may serve: a port held
    # here, on which nothing listens
    with held_port() as port:
        with pytest.raises(SyncError, match=r"pserver \[fd00::7\]:5555 is an IPv6 address, but"):
            insecure_worker([f"127.0.0.1:{port}", "[fd00::7]:5555"], timeout=1)
        insecure_worker([f"localhost:{port}"], timeout=1).close()
