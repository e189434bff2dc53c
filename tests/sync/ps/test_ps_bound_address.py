"""What a shard says of where it listens, when ``--bind`` is not what workers elsewhere dial.

A host name that resolves to loopback (Debian and Ubuntu map the host's own name to
127.0.1.1) served this host alone, printed as the name and without a word: workers on other
hosts waited out their timeout to be told "unreachable". ``--bind 0.0.0.0:0`` printed
``0.0.0.0:PORT``, which no other host can dial. Real shard processes; ``localhost`` stands
for a name that is loopback on every host the suite runs on.
"""

from __future__ import annotations

import socket

import pytest

from distconv.endpoint import join_endpoint, split_endpoint
from distconv.sync.ps.bound_address import bound_address, interface_addresses

LOOPBACK_ONLY = "loopback only: workers on other hosts cannot reach it"


@pytest.mark.timeout(60)
def test_a_name_that_is_loopback_is_printed_as_its_address_and_warned_of(shards):
    (endpoint,) = shards.start(1, workers=1, extra=("--bind", "localhost:0"))
    host, port = split_endpoint(endpoint)
    assert host == "127.0.0.1", endpoint
    said = shards.log_text()
    assert f"--bind localhost resolves to 127.0.0.1: {LOOPBACK_ONLY}" in said, said
    with socket.create_connection((host, port), timeout=5):  # it serves where it says
        pass


@pytest.mark.timeout(60)
def test_an_address_given_is_printed_as_given_without_a_warning(shards):
    """127.0.0.1 is chosen, not stumbled on (``distconv-launch local`` binds it): no word."""
    (endpoint,) = shards.start(1, workers=1)
    assert endpoint.startswith("127.0.0.1:"), endpoint
    assert "loopback only" not in shards.log_text()


@pytest.mark.skipif(not interface_addresses(ipv6=False), reason="no IPv4 address but loopback")
@pytest.mark.timeout(60)
def test_the_wildcard_names_the_addresses_other_hosts_dial(shards):
    (endpoint,) = shards.start(1, workers=1, extra=("--bind", "0.0.0.0:0"))
    host, port = split_endpoint(endpoint)
    assert host == "0.0.0.0", endpoint  # what it bound, as before; the log says the rest
    (line,) = [s for s in shards.log_text().splitlines() if "on every interface" in s]
    dialed = line.split("workers dial ", 1)[1].split(", ")
    assert dialed and "0.0.0.0" not in line, line
    for address in dialed:  # each one named is this host's and takes a connection
        named, named_port = split_endpoint(address)
        assert named_port == port and not named.startswith("127."), line
        with socket.create_connection((named, port), timeout=5):
            pass


def test_a_name_that_resolves_to_debians_own_host_address_is_warned_of():
    """/etc/hosts on Debian and Ubuntu: ``127.0.1.1 myhost``."""
    address = bound_address("myhost", "127.0.1.1", 47100)
    assert address.endpoint == "127.0.1.1:47100"
    assert address.warning.startswith(f"--bind myhost resolves to 127.0.1.1: {LOOPBACK_ONLY}")
    assert address.reach is None


def test_a_name_that_is_not_loopback_is_printed_as_given():
    assert bound_address("shard0.example", "10.0.0.5", 47100).endpoint == "shard0.example:47100"
    assert bound_address("shard0.example", "10.0.0.5", 47100).warning is None


def test_the_ipv6_wildcard_names_ipv4_and_global_ipv6_addresses():
    """``[::]`` is dual-stack: both families are dialled; link-local ones need a scope."""
    reach = bound_address("::", "::", 5555).reach
    for address in interface_addresses(ipv6=True):
        assert join_endpoint(address, 5555) in reach, reach
    assert "fe80" not in reach and "[::1]" not in reach, reach


def test_a_name_that_is_ipv6_loopback_offers_the_hosts_addresses_of_both_families():
    """``--bind ip6-localhost`` (``::1``), on an IPv6-only host: the way out named only IPv4
    addresses, none there; each offered is one ``--bind`` takes as written."""
    ipv6 = [a for a in interface_addresses(ipv6=True) if ":" in a]
    if not ipv6:
        pytest.skip("this host has no global IPv6 address")
    warning = bound_address("ip6-localhost", "::1", 47100).warning
    assert warning.startswith(f"--bind ip6-localhost resolves to ::1: {LOOPBACK_ONLY}"), warning
    for address in interface_addresses(ipv6=True):
        assert join_endpoint(address, 47100) in warning, warning
