"""``distconv-launch local`` started with stdin closed (``<&-``, a daemon's start): the first
socket it opens, a shard's reserved port, would be descriptor 0, which is a child's stdin
(/dev/null) there, so every attempt's shard stopped with ``--bind-fd 0: not an open socket``.
A real launch with a shard and a worker."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV
from tests.processes import run_job


def _launch_with_closed(fd: int, tmp_path, **streams) -> subprocess.CompletedProcess:
    """A real launch of one shard and one worker, its descriptor ``fd`` closed as a shell's
    ``<&-`` or ``>&-`` closes it."""
    argv = [sys.executable, "-m", "launcher", "local", "--workers", "1", "--servers", "1"]
    argv += ["--run-dir", str(tmp_path / "run"), "--insecure", "--", "--epochs", "1"]
    # run_job: a hang takes the shard and the worker with the launcher
    return run_job(
        argv,
        env=ENV,
        timeout=150,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.close(fd),
        **streams,
    )


@pytest.mark.timeout(180)
def test_a_launch_with_stdin_closed_serves_its_shard_on_the_reserved_port(tmp_path):
    done = _launch_with_closed(0, tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "--bind-fd 0" not in done.stdout + done.stderr
    assert "test accuracy" in done.stdout


def test_a_reserved_port_is_never_on_a_standard_stream():
    code = (
        "import os\nos.close(0)\nfrom launcher.ports import reserve_ports\n"
        "socks = reserve_ports(2)\nprint(*[s.fileno() for s in socks], "
        "all(s.get_inheritable() for s in socks), os.path.exists('/proc/self/fd/0'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=60
    )
    first, second, inheritable, stdin_open = done.stdout.split()
    assert int(first) > 2 and int(second) > 2, done.stdout
    assert inheritable == "True" and stdin_open == "False"  # the one on 0 was closed


@pytest.mark.timeout(180)
def test_a_launch_with_stdout_closed_trains_and_keeps_the_childrens_logs(tmp_path):
    """Started with stdout closed (``>&-``) the launcher stopped on ``None.buffer`` before
    any child started, so the reserved port on descriptor 1 (which ``reserve_ports`` moves
    above 2) was never reached."""
    done = _launch_with_closed(1, tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    worker = (tmp_path / "run" / "logs" / "worker-0.log").read_text()
    assert "test accuracy" in worker
    assert "listening on 127.0.0.1:" in (tmp_path / "run" / "logs" / "server-0.log").read_text()
