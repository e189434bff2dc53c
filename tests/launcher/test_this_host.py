"""Which hosts an mpi launch names are this machine (:mod:`launcher.this_host`), told with
no lookup that can hang the launch."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

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


@pytest.mark.parametrize("name", ["a", "node-b", "node1.example.org", "", "[]"])
def test_other_names_are_not(name):
    assert not is_this_host(name)


@pytest.mark.parametrize(
    "address", ["0.0.0.0", "::", "224.0.0.1", "239.1.1.1", "255.255.255.255", "ff02::1"]
)
def test_addresses_of_no_single_host_are_not(address):
    """Any address binds where it names no one host: no rank starts 'on' it here."""
    assert not is_this_host(address)


def _own_and_remote() -> tuple[str | None, str | None]:
    """This host's own routed address (the source the kernel picks for a documentation
    address), and one of the documentation networks' that is not it: test networks use those
    ranges too (a sandbox at 192.0.2.2), so neither is assumed."""
    own = None
    remote = None
    for candidate in ("192.0.2.1", "198.51.100.1", "203.0.113.1", "192.0.2.77"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.connect((candidate, 9))
                source = probe.getsockname()[0]
        except OSError:  # no route out at all: there is no own address to find
            continue
        own = own or source
        if remote is None and source != candidate:
            remote = candidate
    return own, remote


def test_this_hosts_own_address_is_this_host_and_anothers_is_not():
    own, remote = _own_and_remote()
    if own is None or remote is None:
        pytest.skip("this host has no IPv4 route out to tell its own address by")
    assert is_this_host(own) and not is_this_host(remote)


@pytest.mark.timeout(10)
def test_an_address_that_only_binds_is_not_this_host(tmp_path):
    """With net.ipv4.ip_nonlocal_bind=1 (keepalived, HAProxy nodes) every address binds: an
    address counts as here only where it is one of this host's own. Told in a network
    namespace of its own, where the setting is this test's to make."""
    probe = (
        "echo 1 > /proc/sys/net/ipv4/ip_nonlocal_bind || exit 77; "
        f"{sys.executable} -c 'from launcher.this_host import is_this_host as h; "
        'print(h("10.0.0.5"), h("127.0.0.1"))\''
    )
    env = {**os.environ, "PYTHONPATH": str(Path(this_host.__file__).parent.parent)}
    try:
        done = subprocess.run(
            ["unshare", "-rn", "sh", "-c", probe],
            env=env,
            capture_output=True,
            text=True,
            timeout=8,
            cwd=tmp_path,
        )
    except FileNotFoundError:
        pytest.skip("no unshare here")
    if done.returncode == 77 or (done.returncode != 0 and "unshare" in done.stderr):
        pytest.skip(f"no network namespace of its own here: {done.stderr.strip()}")
    assert done.stdout.split() == ["False", "True"], done.stderr


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


def test_an_ipv4_mapped_address_is_its_ipv4_address():
    """``::ffff:127.0.0.1`` names 127.0.0.1: compared as text with the kernel's source address
    (and ``is_loopback`` false for it before Python 3.13) it counted as another host."""
    assert is_this_host("::ffff:127.0.0.1") and is_this_host("[::ffff:127.0.0.1]")
