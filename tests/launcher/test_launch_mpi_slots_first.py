"""``distconv-launch mpi`` refuses more ranks than the hosts' slots before anything else.

The check lived in the builder of the mpiexec command, which the supervisor runs: the launcher
had said ``job launch-...: 2 rank(s) under mpich ...``, made the run directory (its
``launch.lock`` and an empty ``logs/`` left behind) and exited 1, where the refusal is a usage
error, argument-only, as ``--dry-run`` showed it (exit 2, nothing made)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch

REFUSED = (
    "distconv-launch mpi: error: -np 2 is more than the 1 slot(s) of the hosts; add hosts or "
    "slots, or pass --oversubscribe"
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hosts", ["hostfile", "-H"])
def test_more_ranks_than_slots_is_a_usage_error_before_anything_is_made(tmp_path: Path, hosts: str):
    (tmp_path / "hosts.txt").write_text("localhost slots=1\n")
    mpiexec = tmp_path / "mpiexec"  # never to run: it leaves a trace where it does
    mpiexec.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\n")
    mpiexec.chmod(0o755)
    where = ["--hostfile", "hosts.txt"] if hosts == "hostfile" else ["-H", "localhost:1"]
    done = launch(
        "mpi", "-np", "2", *where, "--mpiexec", str(mpiexec), "--mpi-flavor", "mpich",
        "--run-dir", "run", "--", "--epochs", "1", cwd=tmp_path, timeout=30,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (2, REFUSED + "\n"), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts.txt", "mpiexec"]
