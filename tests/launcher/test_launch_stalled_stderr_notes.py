"""The launcher's notes on stderr before any job runs, beside its own messages, are written
within a bound on a stderr that stalls (a paused pager on ``2>``, a reader that died without
closing it): ``distconv.cores``' warning of a malformed CPU quota went to logging's last
resort, and ``k8s --out``'s "wrote N object(s)" was a print, both straight to stderr, where
they blocked the launcher for good (till a signal)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, stalled_pipe
from tests.processes import job_env, job_left


def _ended(tmp_path: Path, command: list[str]) -> tuple[int | None, bytes]:
    """``command``'s exit status on a stderr full from the start (None: it was still running
    after 10 s, then killed) and its stdout."""
    with job_env(ENV) as env, stalled_pipe() as write:
        launcher = subprocess.Popen(
            command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=write
        )
        try:
            out, _ = launcher.communicate(timeout=10)
            status = launcher.returncode
        except subprocess.TimeoutExpired:
            status, out = None, b""
        finally:
            launcher.kill()
            launcher.wait()
            launcher.stdout.close()
        assert job_left(env, 5) == {}
    return status, out


@pytest.mark.timeout(60)
def test_a_malformed_cpu_quota_s_warning_holds_up_no_job_on_a_stalled_stderr(tmp_path: Path):
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cpu.max").write_text("lots 100000\n")  # malformed: warned of, not counted
    (tmp_path / "worker.py").write_text("print('worked')\n")
    setup = (
        "import runpy, distconv.cores as cores; "
        f"cores.usable_cores.__defaults__ = ({str(cgroup)!r},); "  # the fake cgroup's root
        "runpy.run_module('launcher', run_name='__main__', alter_sys=True)"
    )
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "worker.py"]
    status, out = _ended(tmp_path, [sys.executable, "-c", setup, *argv])
    assert (status, b"[worker 0] worked" in out) == (0, True), (status, out)


@pytest.mark.timeout(60)
def test_k8s_out_s_note_holds_up_no_launcher_on_a_stalled_stderr(tmp_path: Path):
    argv = ["k8s", "--workers", "2", "--servers", "1", "--image", "reg/distconv:1"]
    command = [sys.executable, "-m", "launcher", *argv, "--out", str(tmp_path / "m")]
    status, _out = _ended(tmp_path, command)
    assert status == 0
    assert list((tmp_path / "m").iterdir())  # the manifests, written before the note
