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


#: what the refusal adds for a host with no slot count, which Open MPI's mpirun would have read
#: as its cores
UNSTATED = (
    " ('localhost' has no slot count, so it takes 1, as MPICH counts it; Open MPI's own mpirun "
    "--hostfile would count its cores: write them, as 'localhost slots=N' or 'localhost:N')"
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hosts", ["hostfile", "-H", "no count"])
def test_more_ranks_than_slots_is_a_usage_error_before_anything_is_made(tmp_path: Path, hosts: str):
    line = "localhost\n" if hosts == "no count" else "localhost slots=1\n"
    (tmp_path / "hosts.txt").write_text(line)
    mpiexec = tmp_path / "mpiexec"  # never to run: it leaves a trace where it does
    mpiexec.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\n")
    mpiexec.chmod(0o755)
    where = ["-H", "localhost:1"] if hosts == "-H" else ["--hostfile", "hosts.txt"]
    done = launch(
        "mpi", "-np", "2", *where, "--mpiexec", str(mpiexec), "--mpi-flavor", "mpich",
        "--run-dir", "run", "--", "--epochs", "1", cwd=tmp_path, timeout=30,
    )  # fmt: skip
    said = REFUSED + (UNSTATED if hosts == "no count" else "")
    assert (done.returncode, done.stderr) == (2, said + "\n"), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts.txt", "mpiexec"]
