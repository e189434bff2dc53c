"""``failure.json`` named ``role: mpiexec, rank: 0`` when rank 1 of an ``mpi -np 2`` job was
SIGKILLed, and the headline said ``mpiexec 0 failed with signal SIGKILL`` though mpiexec exited
9: an alert keyed on ``rank`` blamed rank 0. ``failed_rank`` is the rank that failed, where
mpiexec's lines name it (null where not), in ``failure.json`` and each ``restarts.jsonl`` line,
and the headline leads with it. Real ``mpiexec -n 2`` (the script of
:mod:`tests.launcher.test_launch_mpi_signal`), and a real local worker."""

from __future__ import annotations

import json

import pytest

from launcher.failure import Failure
from launcher.mpi_exit import mpiexec_reader
from tests.launcher.launch_cli import launch
from tests.launcher.test_launch_mpi_signal import ENDING, _run
from tests.launcher.test_mpi_signal_rank_named import _tail

#: the report's cause of rank 1's SIGKILL, its statuses one host's
KILLED = "rank 1 died of signal 9 (SIGKILL), as mpiexec says; mpiexec itself exited with code 9"


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_killed_rank_is_the_failed_rank_and_leads_the_headline(tmp_path):
    done, report = _run(tmp_path, "kill", 9)
    assert done.returncode == 137, done.stderr
    assert (report["role"], report["rank"], report["failed_rank"]) == ("mpiexec", 0, 1), report
    assert report["cause"] == KILLED, report
    headline = f"distconv-launch: rank 1 (under mpiexec 0) died of signal SIGKILL: {KILLED}"
    assert headline in done.stderr, done.stderr
    assert "mpiexec 0 failed with signal" not in done.stderr, done.stderr


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_each_restart_record_names_the_failed_rank(tmp_path):
    script, run = tmp_path / "ending.py", tmp_path / "run"
    script.write_text(ENDING)
    argv = ["mpi", "-np", "2", "--threads", "1", "--max-restarts", "1", "--run-dir", str(run)]
    done = launch(*argv, "--", str(script), "kill", "9", cwd=tmp_path, timeout=60)
    assert done.returncode == 137, done.stderr
    records = [json.loads(line) for line in (run / "restarts.jsonl").read_text().splitlines()]
    assert [r["failed_rank"] for r in records] == [1], records
    assert json.loads((run / "failure.json").read_text())["failed_rank"] == 1


@pytest.mark.parametrize(
    ("hosts", "ranks", "rank"),
    [
        (["[vm] 0,9"], 2, 1),  # one host's statuses, every rank's: in rank order
        (["[vm] 9,9"], 2, None),  # which SIGKILL came first is not said
        (["[a] 0", "[b] 9"], 2, None),  # across hosts: ranks placed by slots
    ],
)
def test_the_failed_rank_is_the_one_mpiexecs_lines_name(hosts, ranks, rank):
    status, cause = mpiexec_reader(ranks).read(_tail(*hosts), 9)
    failure = Failure("mpiexec", 0, None, "SIGKILL", "m.log", [], 0, -status, cause)
    assert failure.failed_rank == rank, cause


def test_a_workers_failed_rank_is_its_own_and_a_shards_none():
    assert Failure("worker", 1, 3, None, "w.log", [], 0).failed_rank == 1
    assert Failure("server", 0, 1, None, "s.log", [], 0).failed_rank is None
