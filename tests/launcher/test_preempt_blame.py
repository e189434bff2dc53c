"""Whom the launcher blames for a checkpointed stop that a signal to ranks caused, and who its
report says got the signal, on stand-in children that print the ranks' stop lines and exit 143
as ``distconv train`` does.

The rank that got the signal may exit a moment after the others (it closes its sync last):
the launcher waits for the ranks' own exits before its stop, whose SIGTERM would otherwise end
that rank by the signal after its stop line, and the report would blame another.
"""

from __future__ import annotations

import io
import json
import signal
import sys
from pathlib import Path
from typing import BinaryIO

import pytest

from launcher.child import ChildSpec
from launcher.supervisor import Supervisor

OTHER = "distconv train: stopped after step 8: rank 1 got SIGTERM"
OWN = "distconv train: stopped by SIGTERM after step 8"


def stops(rank: int, line: str, after: float, code: int = 143) -> ChildSpec:
    """A worker that says ``line``, then exits ``code`` ``after`` seconds on (a SIGTERM
    meanwhile ends it by the signal: Python's default, as after ``distconv train`` restored
    it)."""
    body = f"import sys, time; print({line!r}, flush=True); time.sleep({after}); sys.exit({code})"
    return ChildSpec("worker", rank, [sys.executable, "-c", body])


def supervised(
    tmp_path: Path, specs: list[ChildSpec], out: BinaryIO | None = None
) -> tuple[int, str, dict]:
    """The status, the launcher's messages and failure.json of a job of ``specs``, the
    children's lines written to ``out`` (a buffer by default)."""
    err = io.BytesIO()
    out = io.BytesIO() if out is None else out
    sup = Supervisor(tmp_path / "run", grace=10, out=out, err=err, settle=10.0)
    status = sup.run(lambda restart: specs, 0)
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    return status, err.getvalue().decode(), report


@pytest.mark.timeout(60)
def test_the_signalled_worker_that_exits_last_is_blamed_with_its_own_exit(tmp_path):
    status, err, report = supervised(tmp_path, [stops(0, OTHER, 0), stops(1, OWN, 1.5)])
    assert status == 143, err
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 1, 143), report
    headline = "worker 1 stopped by its own SIGTERM after step 8, with a checkpoint (exit code 143)"
    assert headline in err, err
    assert "a checkpointed stop, not a crash: worker 1 got SIGTERM itself" in err, err


@pytest.mark.timeout(60)
def test_mpiexec_whose_ranks_all_got_the_signal_is_not_said_to_have_got_it(tmp_path):
    """Under ``distconv-launch mpi`` the one child is ``mpiexec``, whose tail holds each
    rank's line: where every rank says the signal was its own (a scheduler's SIGTERM to each),
    the report says its ranks got it, not ``mpiexec 0`` itself, which got no signal."""
    lines = [f"[{rank}] {OWN}" for rank in (0, 1)]
    body = f"import sys; print({chr(10).join(lines)!r}, flush=True); sys.exit(143)"
    status, err, report = supervised(
        tmp_path, [ChildSpec("mpiexec", 0, [sys.executable, "-c", body])]
    )
    assert status == 143, err
    headline = "mpiexec 0 stopped by its ranks' own SIGTERM after step 8, with a checkpoint"
    assert headline in err, err
    assert "a checkpointed stop, not a crash: mpiexec 0's ranks got SIGTERM themselves" in err
    assert "got SIGTERM itself" not in err, err


@pytest.mark.timeout(60)
def test_a_worker_that_fails_at_its_close_after_the_stop_is_reported_not_the_stop(tmp_path):
    """The signalled worker's stop line, then an error at its close (exit 1), while the other
    had exited 143: the launcher reported the other's checkpointed stop, 'not a crash', and
    exited 143, the failure nowhere in its report."""
    status, err, report = supervised(tmp_path, [stops(0, OTHER, 0), stops(1, OWN, 1.5, code=1)])
    assert status == 1, err
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 1, 1), report
    assert "worker 1 failed with exit code 1" in err and "not a crash" not in err, err


def killed_after(
    rank: int, line: str, after: float, signum: signal.Signals = signal.SIGTERM
) -> ChildSpec:
    """A worker that says ``line``, then ``after`` seconds on is ended by a ``signum`` of its
    own (the default handler, as ``distconv train`` restores it after its stop): a signal that
    reached it as it closed, after its checkpointed stop (a kubelet's or a user's kill of each
    worker, one after another; a scheduler's second SIGTERM)."""
    body = (
        f"import os, signal, time; signal.signal({int(signum)}, signal.SIG_DFL); "
        f"print({line!r}, flush=True); time.sleep({after}); "
        f"os.kill(os.getpid(), {int(signum)}); time.sleep(30)"
    )
    return ChildSpec("worker", rank, [sys.executable, "-c", body])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("late_first", [True, False], ids=["signal-first", "stop-first"])
def test_a_worker_ended_by_a_late_signal_after_its_stop_line_leaves_the_stop_reported(
    tmp_path, late_first
):
    """Rank 1 got SIGTERM; rank 0's own came a moment later, as it closed after the agreed
    stop (its line says so, its checkpoint written), and ended it by the signal. The launcher
    reported 'worker 0 failed with signal SIGTERM', the checkpointed stop and the way on from
    it unsaid, whichever of the two ended first."""
    late, stopped = (0, 1.5) if late_first else (1.5, 0)
    specs = [killed_after(0, OTHER, late), stops(1, OWN, stopped)]
    status, err, report = supervised(tmp_path, specs)
    assert status == 143, err
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 1, 143), report
    assert "failed with signal SIGTERM" not in err, err
    assert "a checkpointed stop, not a crash: worker 1 got SIGTERM itself" in err, err
