"""Which hosts an mpi launch names are this machine (:mod:`launcher.this_host`), told with
no lookup that can hang the launch (k575)."""

from __future__ import annotations

import socket
import time

import pytest

from launcher import this_host
from launcher.this_host import FQDN_BOUND, all_here, is_this_host


@pytest.mark.parametrize(
    "name",
    ["localhost", "LocalHost.", "127.0.0.1", "127.0.0.2", "::1", "[::1]", "0:0:0:0:0:0:0:1"],
)
def test_loopback_names_and_addresses_are_this_host(name):
    assert is_this_host(name)


def test_this_hosts_own_name_is_this_host():
    own = socket.gethostname()
    assert is_this_host(own) and is_this_host(own.upper()) and is_this_host(own.split(".")[0])


@pytest.mark.parametrize("name", ["a", "node-b", "node1.example.org", "192.0.2.1", "", "[]"])
def test_other_names_and_addresses_are_not(name):
    """192.0.2.1 is a documentation address (TEST-NET-1): no interface of this host has it."""
    assert not is_this_host(name)


def test_a_list_is_here_only_if_every_host_is():
    assert all_here(["localhost", "127.0.0.1"]) and not all_here(["localhost", "a"])


@pytest.mark.timeout(10)
def test_a_resolver_that_does_not_answer_holds_the_check_briefly(monkeypatch):
    """A name that could be this host's fully qualified one is looked up (getfqdn), and a
    resolver that does not answer would hold the launch for its own timeouts: the lookup is
    given FQDN_BOUND seconds, then the name counts as another host's."""
    monkeypatch.setattr(socket, "getfqdn", lambda: time.sleep(3) or "never")
    this_host._fqdn.cache_clear()
    try:
        started = time.monotonic()
        assert not is_this_host(socket.gethostname().split(".")[0] + ".example.org")
        assert time.monotonic() - started < FQDN_BOUND + 1
    finally:
        this_host._fqdn.cache_clear()  # the next test looks it up again, unpatched
