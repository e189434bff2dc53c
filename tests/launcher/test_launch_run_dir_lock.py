"""A run directory belongs to one launch at a time: a second ``distconv-launch`` into it while
the first runs stops at once, naming the first, and touches nothing of the first's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from launcher.shown import shown
from tests.launcher.attempt_logs import logged
from tests.launcher.launch_cli import ENV, launch
from tests.processes import job_env

#: the second launch's own flags
SECOND = {"local": ("local", "--workers", "1", "--servers", "0"), "mpi": ("mpi", "-np", "1")}
#: a worker that says it is up, then waits to be stopped
WAITS = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).write_text(''); time.sleep(60)"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("second", ["local", "mpi"])
def test_a_second_launch_into_a_running_launchs_run_dir_is_refused(tmp_path, second):
    """It started its own children there: their lines went into the first launch's logs,
    its failure (the worker finding the output directory in use) deleted the first's
    ``failure.json`` or left one beside a job that then succeeded."""
    if second == "mpi" and shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed")
    run_dir, up = tmp_path / "run", tmp_path / "up"
    script = tmp_path / "waits.py"
    script.write_text(WAITS)
    # job_env: what the first launch started goes, even where its launcher hangs on the stop
    with job_env(ENV) as env:
        first = subprocess.Popen(
            [sys.executable, "-m", "launcher", "local", "--workers", "1", "--servers", "0",
             "--run-dir", str(run_dir), "--grace", "5", "--", str(script), str(up)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its own group: stopped whole whatever the test does
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not up.exists() and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert up.exists(), "the first launch's worker never started"
            logs = sorted(p.name for p in (run_dir / "logs").iterdir())
            own = SECOND[second]
            done = launch(
                *own, "--run-dir", str(run_dir), "--", "sh", "-c", "echo second", cwd=tmp_path
            )
            assert done.returncode == 1, done.stderr
            last = done.stderr.strip().splitlines()[-1]
            assert last.startswith(f"distconv-launch {second}: error: {shown(run_dir)} is in "
                                   f"use by the launch of pid {first.pid} on "), last  # fmt: skip
            # the way on with this run too (a resume gives the same --job-id): not only another
            # directory, which starts another run
            assert last.endswith(
                "two launches must not share a run directory: wait for that launch to end (or "
                "stop it) to go on with this run, or choose another --run-dir or --job-id"
            ), last
            assert "second" not in done.stdout
            assert sorted(p.name for p in (run_dir / "logs").iterdir()) == logs
            assert logged(run_dir / "logs" / "worker-0.log") == b""  # none of the second's
            assert not (run_dir / "failure.json").exists()
            assert first.poll() is None  # the first runs on, untouched
        finally:
            os.killpg(first.pid, signal.SIGTERM)
            try:
                first.communicate(timeout=30)
            finally:
                first.kill()  # where it hung on the stop: job_env's end takes the rest
                first.wait()
        assert first.returncode == 143, first.stderr
        # the lock goes with its launch: the next one into the directory runs (inside the
        # block: a child of the first that outlived it, and held the lock, is still there)
        done = launch("local", "--workers", "1", "--servers", "0", "--run-dir", str(run_dir),
                      "--", "sh", "-c", "echo again", cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "[worker 0] again" in done.stdout


@pytest.mark.timeout(60)
def test_a_run_dir_without_flock_is_named_not_a_bare_errno(tmp_path, monkeypatch, capsys):
    """On a file system without ``flock`` (an NFS mount without locking: ENOLCK) the launch
    ended on ``error: [Errno 37] No locks available``, naming neither the lock nor the run
    directory, and the lock file's descriptor stayed open; then on the lock and the cause, but
    no way out."""
    import errno
    import fcntl

    from launcher.cli import main

    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    opened: list[int] = []
    real_open = os.open

    def recording_open(*args, **kwargs):
        fd = real_open(*args, **kwargs)
        opened.append(fd)
        return fd

    monkeypatch.setattr(fcntl, "flock", no_flock)
    monkeypatch.setattr(os, "open", recording_open)
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", str(run_dir), "--", "true"]
    assert main(argv) == 1
    monkeypatch.undo()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    lock = run_dir / "launch.lock"
    said = (
        f"distconv-launch local: error: cannot take {shown(lock)}: no locks available (its file "
        "system takes no flock, as an NFS mount without locking: choose a --run-dir on one that "
        "does, a local disk)"
    )
    assert last == said, last
    assert opened, "the lock was never opened"
    for fd in opened:  # closed: a descriptor number no file has
        with pytest.raises(OSError):
            os.fstat(fd)
