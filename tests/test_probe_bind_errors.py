"""A port or interface the probes cannot bind is one plain line naming the flag and the cause,
as ``distconv pserver``'s ``cannot bind HOST:PORT: ...``: it read ``[Errno 98] probes and
metrics on ...``, the errno's number first."""

from __future__ import annotations

import errno
import os
import socket
from types import SimpleNamespace

import pytest

from distconv import service as service_module
from distconv.job import _start_service
from distconv.service import ServiceEndpoints
from tests.test_cli import distconv

#: TEST-NET-1 (RFC 5737): an address of no interface here, refused without a DNS look-up
NOT_HERE = "192.0.2.1"


def _held_port() -> socket.socket:
    """A listening socket on 127.0.0.1 port 0: its port is taken while it is open."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "[Errno" not in lines[0], lines[0]
    return lines[0]


@pytest.mark.timeout(60)
def test_train_names_a_probe_port_in_use_in_one_plain_line(tmp_path):
    with _held_port() as held:
        port = held.getsockname()[1]
        done = distconv(
            "train", "--health-port", str(port), "--out", str(tmp_path / "r"), timeout=60
        )
    assert done.returncode == 1, done.stderr
    said = "distconv train: error: --health-port: cannot bind probes and metrics on "
    said += f"127.0.0.1:{port}: "
    assert _one_line(done.stderr).startswith(said), done.stderr
    assert "in use" in done.stderr


@pytest.mark.timeout(60)
def test_pserver_names_a_probe_host_of_no_interface_here_in_one_plain_line():
    done = distconv(
        *("pserver", "--bind", "127.0.0.1:0", "--shard", "0", "--num-shards", "1"),
        *("--workers", "1", "--insecure", "--health-host", NOT_HERE, "--health-port", "0"),
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    said = (
        f"distconv pserver: error: --health-host: cannot bind probes and metrics on {NOT_HERE}:0: "
    )
    assert _one_line(done.stderr).startswith(said), done.stderr


@pytest.mark.parametrize(
    "port, local_rank, flag", [(65536, 0, "port"), (65535, 1, "port"), (None, 1, "host")]
)
def test_a_rank_s_probes_name_the_flag_and_keep_the_errno(port, local_rank, flag):
    """Under MPI or the launcher, a rank binds --health-port + its local rank: said after the
    cause where the port is at fault, in the same plain line (not where --health-host
    is); the errno stays readable for code that asks."""
    runtime = SimpleNamespace(role="worker", rank=local_rank, local_rank=local_rank)
    host = NOT_HERE if flag == "host" else "127.0.0.1"
    typed = port if port is not None else 8000
    with pytest.raises(OSError) as caught:
        _start_service(typed, host, runtime)
    message, bound = str(caught.value), typed + local_rank
    assert message.startswith(
        f"--health-{flag}: cannot bind probes and metrics on {host}:{bound}: "
    )
    assert "[Errno" not in message
    # only beside the port at fault: beside --health-host it was true but beside the point
    shifted = local_rank == 1 and flag == "port"
    assert message.endswith(f" (--health-port {typed} + local rank 1)") is shifted, message
    assert ("local rank" in message) is shifted, message
    assert caught.value.errno is not None


def test_the_service_s_own_error_is_plain_too():
    with _held_port() as held, pytest.raises(OSError) as caught:
        ServiceEndpoints().start("127.0.0.1", held.getsockname()[1])
    assert str(caught.value).startswith("--health-port: cannot bind probes and metrics on ")
    assert caught.value.errno == 98 and "[Errno" not in str(caught.value)


@pytest.mark.timeout(60)
def test_a_probe_host_the_port_cannot_be_blamed_for_names_health_host():
    """``--health-host fe80::1`` (link-local, no interface named) fails with EINVAL, or
    EAFNOSUPPORT on a host without IPv6, whatever the port: both blamed --health-port, here
    0, any port."""
    done = distconv(
        *("pserver", "--bind", "127.0.0.1:0", "--shard", "0", "--num-shards", "1"),
        *("--workers", "1", "--insecure", "--health-host", "fe80::1", "--health-port", "0"),
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    said = "distconv pserver: error: --health-host: cannot bind probes and metrics on "
    assert _one_line(done.stderr).startswith(said + "[fe80::1]:0: "), done.stderr


@pytest.mark.parametrize(
    "code, flag",
    [
        (errno.EADDRINUSE, "--health-port"),
        (errno.EACCES, "--health-port"),
        (errno.EADDRNOTAVAIL, "--health-host"),
        (errno.EAFNOSUPPORT, "--health-host"),
        (errno.EINVAL, "--health-host"),
    ],
)
def test_the_flag_named_is_the_one_at_fault(code, flag, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(service_module, "ProbeHTTPServer", refuse)
    with pytest.raises(OSError) as refused:
        ServiceEndpoints(role="worker", rank=0).start("127.0.0.1", 8080)
    assert str(refused.value).startswith(f"{flag}: cannot bind probes and metrics on "), refused
    assert refused.value.errno == code


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM])
def test_a_resource_run_out_names_no_flag(code, monkeypatch):
    """Out of file descriptors (or buffers, or memory), the probes cannot bind on any host or
    port: the line said ``--health-host: ... Too many open files``, sending the user to
    change a host that was right. No flag, and no ``--health-port + local
    rank`` either, on a rank whose port was shifted."""

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(service_module, "ProbeHTTPServer", refuse)
    runtime = SimpleNamespace(role="worker", rank=1, local_rank=1)
    with pytest.raises(OSError) as refused:
        _start_service(8000, "127.0.0.1", runtime)
    said = f"cannot bind probes and metrics on 127.0.0.1:8001: {os.strerror(code)}"
    assert str(refused.value) == said
    assert refused.value.errno == code


@pytest.mark.timeout(60)
def test_a_probe_port_another_job_holds_names_the_way_out(tmp_path):
    """A sweep passes each job the same flags: the second job on a host met the first's
    --health-port, and the error named the port but not that 0 takes any free one."""
    with _held_port() as held:
        port = held.getsockname()[1]
        done = distconv(
            "train", "--health-port", str(port), "--out", str(tmp_path / "r"), timeout=60
        )
    assert done.returncode == 1, done.stderr
    way_out = "(another job on this host? --health-port 0 takes any free port)"
    assert _one_line(done.stderr).endswith(f"in use {way_out}"), done.stderr
    assert not (tmp_path / "r").exists()


def test_a_rank_s_probe_port_in_use_names_its_local_rank_then_the_way_out():
    runtime = SimpleNamespace(role="worker", rank=1, local_rank=1)
    with _held_port() as held:
        port = held.getsockname()[1]
        with pytest.raises(OSError) as caught:
            _start_service(port - 1, "127.0.0.1", runtime)
    way_out = "another job on this host? --health-port 0 takes any free port"
    assert str(caught.value).endswith(f" (--health-port {port - 1} + local rank 1; {way_out})")
    assert caught.value.errno == errno.EADDRINUSE
