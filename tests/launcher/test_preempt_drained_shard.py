"""A shard's exit 0 while its workers still run, on stand-in children whose exits come in a
fixed order (a real job's shard and workers end within moments of each other, either way):
the workers then all exit 0 and the job finished; one fails, and the shard's exit is the
attempt's failure, reported at that worker's failure, not after the grace."""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import pytest

from launcher.child import ChildSpec
from launcher.supervisor import Supervisor
from tests.launcher.test_preempt_blame import stops


def _exits(role: str, rank: int, code: int, after: float) -> ChildSpec:
    """A child that exits ``code`` ``after`` seconds on (or at its SIGTERM)."""
    body = f"import sys, time; time.sleep({after}); sys.exit({code})"
    return ChildSpec(role, rank, [sys.executable, "-c", body])


def _supervised(tmp_path: Path, specs: list[ChildSpec]) -> tuple[int, str, float]:
    """The status and messages of a job of ``specs`` (grace 15 s, one restart allowed), and
    the seconds it took."""
    err = io.BytesIO()
    sup = Supervisor(tmp_path / "run", grace=15, out=io.BytesIO(), err=err)
    start = time.monotonic()
    status = sup.run(lambda restart: specs, 1)
    return status, err.getvalue().decode(), time.monotonic() - start


@pytest.mark.timeout(60)
def test_a_shard_that_exits_0_before_its_finishing_workers_ends_a_finished_job(tmp_path):
    specs = [_exits("server", 0, 0, 0.2), _exits("worker", 0, 0, 2), _exits("worker", 1, 0, 2)]
    status, err, _ = _supervised(tmp_path, specs)
    assert status == 0, err
    assert "server 0 stopped on its own signal once the workers said bye" in err, err
    assert not (tmp_path / "run" / "failure.json").exists(), err
    assert not (tmp_path / "run" / "restarts.jsonl").exists(), err  # no restart spent on it


@pytest.mark.timeout(60)
def test_a_shard_that_exits_0_and_then_a_worker_fails_is_the_failure_at_once(tmp_path):
    specs = [_exits("server", 0, 0, 0.2), _exits("worker", 0, 1, 1), _exits("worker", 1, 0, 300)]
    status, err, took = _supervised(tmp_path, specs)
    assert status == 1, err
    assert "server 0 exited (code 0) while workers were running" in err, err
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["restart"]) == ("server", 0, 1), report
    assert took < 12, f"{took:.0f} s: the launcher waited out the grace (15 s) for the workers"


@pytest.mark.timeout(60)
def test_a_shard_drained_for_the_workers_checkpointed_stop_leaves_the_stop_reported(tmp_path):
    """SIGTERM to every process of the job (a node agent's): the shard drains until the
    workers' bye and may exit 0 before they exit 143 with their checkpoint. That stop was
    reported as the shard's exit 0 'while workers were running' (exit 1), the way on from the
    checkpoint unsaid."""
    specs = [
        _exits("server", 0, 0, 0.2),
        stops(0, "distconv train: stopped after step 8: rank 1 got SIGTERM", 1),
        stops(1, "distconv train: stopped by SIGTERM after step 8", 1.5),
    ]
    status, err, _ = _supervised(tmp_path, specs)
    assert status == 143, err
    assert "server 0 exited (code 0)" not in err, err
    assert "a checkpointed stop, not a crash: worker 1 got SIGTERM itself" in err, err
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 1, 143), report


@pytest.mark.timeout(60)
def test_a_shard_drained_for_a_stop_that_a_late_signal_ended_leaves_the_stop_reported(tmp_path):
    """As above, but rank 0's own SIGTERM came as it closed after the agreed stop, and ended it
    by the signal: still the workers' checkpointed stop, not the shard's exit 0."""
    body = (
        "import os, signal; print('distconv train: stopped after step 8: rank 1 got SIGTERM', "
        "flush=True); import time; time.sleep(1); os.kill(os.getpid(), signal.SIGTERM)"
    )
    specs = [
        _exits("server", 0, 0, 0.2),
        ChildSpec("worker", 0, [sys.executable, "-c", body]),
        stops(1, "distconv train: stopped by SIGTERM after step 8", 1.5),
    ]
    status, err, _ = _supervised(tmp_path, specs)
    assert status == 143, err
    assert "server 0 exited (code 0)" not in err, err
    assert "a checkpointed stop, not a crash: worker 1 got SIGTERM itself" in err, err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shard_first", [False, True], ids=["workers-first", "shard-first"])
def test_a_stop_a_shard_stopped_alone_asked_for_is_reported_as_the_checkpointed_stop(
    tmp_path, shard_first
):
    """SIGTERM to one shard alone: it asks the workers for their checkpointed stop, which they
    say naming it, exit 143, and then it exits 0. The line names no rank, and was read as a
    worker's failure with exit code 143, the way on unsaid."""
    said = "distconv train: stopped after step 8: pserver shard 0 got SIGTERM"
    specs = [
        _exits("server", 0, 0, 0.2 if shard_first else 1.5),
        stops(0, said, 1),
        stops(1, said, 1),
    ]
    status, err, _ = _supervised(tmp_path, specs)
    assert status == 143, err
    assert "a checkpointed stop, not a crash: pserver shard 0 got SIGTERM" in err, err
    assert "failed with exit code 143" not in err, err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("crash_first", [False, True], ids=["stop-first", "crash-first"])
def test_a_worker_that_crashes_while_the_shard_drains_for_the_stop_is_the_failure(
    tmp_path, crash_first
):
    """SIGTERM to every process: the shard drains for the workers' checkpointed stop, rank 0
    stops with its checkpoint, and rank 1 crashes (exit 1) as it closes. The report named the
    shard's exit 0 'while workers were running' and pointed at its log, the crash named
    nowhere."""
    stop, crash = (1.5, 1) if crash_first else (1, 1.5)
    specs = [
        _exits("server", 0, 0, 0.2),
        stops(0, "distconv train: stopped by SIGTERM after step 8", stop),
        _exits("worker", 1, 1, crash),
    ]
    status, err, _ = _supervised(tmp_path, specs)
    assert status == 1, err
    assert "server 0 exited (code 0)" not in err, err
    assert "worker 1 failed with exit code 1" in err, err
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 1, 1), report


#: a worker's last line as it stops on the failure of a shard stopped alone by its SIGTERM
#: (``distconv.sync.ps.drain``: it tells each worker still in, which exits 75 as its victim)
_TOLD = (
    "distconv.sync.peers.PeerFailed: rank {rank}, push: pserver 127.0.0.1:5000: shard 0 "
    "stopped on its SIGTERM while rank(s) 0, 1 trained on 16 steps and 10 s since the signal: "
    "they were not stopped with it; a restart of the job resumes from its newest checkpoint"
)


def _told(rank: int, after: float) -> ChildSpec:
    """A worker that says the shard's failure (:data:`_TOLD`), then exits 75 ``after``
    seconds on, as ``distconv train`` told it by the shard."""
    line = _TOLD.format(rank=rank)
    body = f"import sys, time; print({line!r}, flush=True); time.sleep({after}); sys.exit(75)"
    return ChildSpec("worker", rank, [sys.executable, "-c", body])


@pytest.mark.timeout(60)
def test_workers_told_by_a_shard_stopped_alone_that_exit_before_it_blame_the_shard(tmp_path):
    """The shard fails the job on its own stop and tells every worker, which exits 75 at once;
    the shard answers on a moment and exits 0 after them. The launcher reported the first
    worker (``failed with exit code 75 ... no other child had failed yet``, exit 75, "try
    again"), the shard's exit no failure once no worker ran: the cause, the shard, unnamed."""
    specs = [_exits("server", 0, 0, 1.2), _told(0, 0.3), _told(1, 0.4)]
    status, err, took = _supervised(tmp_path, specs)
    assert status == 1, err
    assert "server 0 exited (code 0) while workers were running" in err, err
    assert "worker 0, worker 1 stopped because of it (exit code 75)" in err, err
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("server", 0, 0), report
    assert took < 12, f"{took:.0f} s: the launcher waited out the grace (15 s)"


@pytest.mark.timeout(60)
def test_a_victim_naming_a_shard_stopped_alone_that_stays_up_is_reported_after_the_settle(
    tmp_path,
):
    """A shard named so that has not exited within its answer window (and its close) is not
    waited for longer: the victim is reported, as where its lines name no cause."""
    specs = [_exits("server", 0, 0, 300), _told(0, 0.3), _told(1, 0.3)]
    status, err, took = _supervised(tmp_path, specs)
    assert status == 75, err
    assert "failed with exit code 75 (stopped because another rank failed" in err, err
    assert took < 12, f"{took:.0f} s: the settle waited on for the shard"


@pytest.mark.timeout(60)
def test_a_shard_stopped_alone_that_answers_on_for_a_silent_worker_is_blamed(tmp_path):
    """The shard told rank 0, which exits 75 at once, and answers on for its whole window (3 s)
    for rank 1, silent (a long evaluation, a hung worker): its exit 0 comes after the usual
    settle (2 s) ends. The launcher blamed rank 0 (exit 75, "try again", the cause unnamed);
    the settle waits out the shard's window for a shard the victim names."""
    specs = [_exits("server", 0, 0, 3.3), _told(0, 0.3), _exits("worker", 1, 0, 300)]
    status, err, took = _supervised(tmp_path, specs)
    assert status == 1, err
    assert "server 0 exited (code 0) while workers were running" in err, err
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("server", 0, 0), report
    assert took < 30, f"{took:.0f} s: the launcher waited out the grace (15 s)"
