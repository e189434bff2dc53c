"""``distconv pserver --bind-fd FD``: a shard serves on a listening socket it inherits, as
``distconv-launch local`` reserves its shards' ports (a port it only picked could be taken by
another process before the shard bound it). Real shard processes, sockets and a worker."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys

import pytest
from ps_helpers import insecure_worker, small_net

from tests.child_env import child_path
from tests.probes import has_ipv6_loopback

BASE = ["pserver", "--shard", "0", "--num-shards", "1", "--workers", "1", "--insecure"]
BASE += ["--drain-seconds", "0"]


def _shard(port: int, fd: int, host: str = "127.0.0.1", named: int | None = None):
    """A shard inheriting ``fd``, told ``--bind-fd`` ``named`` (``fd`` unless given)."""
    argv = [sys.executable, "-m", "distconv", *BASE, "--bind", f"{host}:{port}"]
    return subprocess.Popen(
        [*argv, "--bind-fd", str(fd if named is None else named)],
        pass_fds=(fd,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": child_path()},
    )


def _listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


@pytest.mark.timeout(60)
def test_a_shard_serves_on_the_socket_it_inherits():
    with _listening() as held:
        port = held.getsockname()[1]
        shard = _shard(port, held.fileno())
        try:
            assert shard.stdout.readline().split()[-1] == f"127.0.0.1:{port}"
            sync = insecure_worker([f"127.0.0.1:{port}"])
            try:
                net = small_net()
                sync.setup(net.parameters())  # a hello, a seed, their replies: it serves
                assert sync.mode == "sync"
            finally:
                sync.close()
        finally:
            shard.terminate()
            shard.wait(timeout=10)
            shard.stdout.close()
            shard.stderr.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["file", "unlistened", "other port"])
def test_a_bind_fd_that_is_no_listening_socket_on_the_port_is_refused_naming_it(tmp_path, what):
    """ZeroMQ takes any descriptor: a shard handed a file, a socket never listened on or one
    on another port would fail later, or serve where no worker was told to go."""
    with _listening() as other, socket.socket() as unlistened:
        port = other.getsockname()[1]
        if what == "file":
            held = open(tmp_path / "f", "w")
            words = "not an open socket"
        elif what == "unlistened":
            unlistened.bind(("127.0.0.1", 0))
            held, port = unlistened, unlistened.getsockname()[1]
            words = f"not a TCP socket listening on port {port} (not listening"
        else:
            held, port = other, port + 1 if port < 65535 else port - 1
            words = f"not a TCP socket listening on port {port} (listening, port"
        fd = held.fileno()
        try:
            shard = _shard(port, fd)
            out, err = shard.communicate(timeout=30)
        finally:
            if what == "file":
                held.close()
    assert shard.returncode == 1, err
    assert f"--bind-fd {fd}: {words}" in err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("beyond", [-1, 2**32])
def test_a_bind_fd_that_no_file_descriptor_has_is_refused_in_one_line(beyond):
    """A descriptor is a C int: -1 stopped the shard with a ValueError traceback, and 2**32 +
    FD, which the socket module wrapped to FD (so the check found it listening on the port),
    with ZeroMQ's OverflowError."""
    with _listening() as sock:
        fd = sock.fileno()
        named = beyond if beyond < 0 else beyond + fd
        shard = _shard(sock.getsockname()[1], fd, named=named)
        out, err = shard.communicate(timeout=30)
    assert shard.returncode == 1, err
    assert f"--bind-fd must be a file descriptor, 0..2147483647, got {named}" in err
    assert "Traceback" not in err and "listening on" not in out


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "family, address, host",
    [
        (socket.AF_INET, "127.0.0.1", "0.0.0.0"),
        (socket.AF_INET6, "::1", "127.0.0.1"),
        (socket.AF_INET, "127.0.0.1", "[::1]"),
    ],
)
def test_a_bind_fd_on_another_address_than_binds_host_is_refused(family, address, host):
    """The shard names --bind's host as its endpoint: a socket on 127.0.0.1 handed with
    --bind 0.0.0.0:P served on loopback alone while the shard said 'listening on
    0.0.0.0:P', and one on [::1] for --bind 127.0.0.1:P said 127.0.0.1, where IPv4 workers
    were refused."""
    if family == socket.AF_INET6 or ":" in host:
        if not has_ipv6_loopback():
            pytest.skip("no IPv6 loopback")
    with socket.socket(family) as held:
        held.bind((address, 0))
        held.listen(8)
        port, fd = held.getsockname()[1], held.fileno()
        shard = _shard(port, fd, host)
        try:
            out, err = shard.communicate(timeout=20)
        except subprocess.TimeoutExpired:  # it served: the bug; stop it, say what it said
            shard.kill()
            out, err = shard.communicate(timeout=10)
    assert shard.returncode == 1, (out, err)
    shown = f"[{address}]" if ":" in address else address
    assert f"--bind-fd {fd}: listening on {shown}:{port}, not on --bind's host " in err
    assert "listening on" not in out  # it never said it served there


def _link_local() -> tuple[str, int, str] | None:
    """An IPv6 link-local address here, with its interface's index and name, or None."""
    try:
        with open("/proc/net/if_inet6") as table:
            rows = [line.split() for line in table]
    except OSError:
        return None
    for hexed, index, _, scope, _, name in rows:
        if scope == "20":  # link scope
            address = str(ipaddress.ip_address(bytes.fromhex(hexed)))
            try:
                with socket.socket(socket.AF_INET6) as sock:
                    sock.bind((address, 0, 0, int(index, 16)))
            except OSError:  # tentative (DAD) or gone: try another
                continue
            return address, int(index, 16), name
    return None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("zone", ["name", "index", "other"])
def test_a_link_local_bind_with_its_interface_serves_on_its_own_socket(zone):
    """``--bind [fe80::1%eth0]:P`` names the interface by name, the socket by index: the host
    compared as written (fe80::1%eth0 against fe80::1) refused the launcher-style socket on
    that very address and interface; another interface still is."""
    found = _link_local()
    if found is None:
        pytest.skip("no IPv6 link-local address")
    address, index, name = found
    other = "lo" if name != "lo" else "1000"
    written = {"name": name, "index": str(index), "other": other}[zone]
    with socket.socket(socket.AF_INET6) as held:
        held.bind((address, 0, 0, index))
        held.listen(8)
        port, fd = held.getsockname()[1], held.fileno()
        shard = _shard(port, fd, f"[{address}%{written}]")
        said = ""
        for line in shard.stdout:  # one that serves says so, then is stopped; one refused ends
            said += line
            if "listening on" in line:
                shard.terminate()
                break
        out, err = shard.communicate(timeout=20)
        out = said + out
    if zone == "other":
        assert shard.returncode == 1, (out, err)
        assert f"--bind-fd {fd}: listening on [{address}%{index}]:{port}, not on " in err
    else:
        assert f"pserver shard 0 listening on [{address}%{written}]:{port}" in out, err
        assert "--bind-fd" not in err
