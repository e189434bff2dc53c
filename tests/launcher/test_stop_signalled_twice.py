"""A checkpointed stop whose workers a later signal ended as they closed, on stand-in children
(real subprocesses) that print a rank's stop line, then die by SIGTERM or SIGINT: a node agent
or a scheduler that repeats its SIGTERM to every process, 0.3 s apart. Each worker had written
its checkpoint and its stop line; the launcher reported "worker 0 failed with signal SIGTERM",
the stop and the way on from it unsaid. It is the checkpointed stop: in the headline, in
``failure.json`` (its ``cause``) and in the way on, by one rule
(:func:`launcher.own_stop.checkpointed_stop`).

The stop line is read once the child's pump has copied its last lines: the waiter may see the
exit while the line is still in the pipe, the pump held up by the launcher's own output.
"""

from __future__ import annotations

import io
import signal
import sys
import time

import pytest

from launcher.child import ChildSpec
from launcher.own_stop import PUMP_END_SECONDS
from tests.launcher.test_preempt_blame import OTHER, OWN, killed_after, stops, supervised

#: the cause ``failure.json`` and the headline give a stop that a later SIGTERM ended
LATE_SIGTERM = "a later SIGTERM ended it as it closed, after its stop and checkpoint"


def _shard_drained(after: float = 0.2) -> ChildSpec:
    """A shard that exits 0 ``after`` seconds on: drained for the workers' stop."""
    body = f"import time; time.sleep({after})"
    return ChildSpec("server", 0, [sys.executable, "-c", body])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shard", [False, True], ids=["workers", "workers-and-shard"])
def test_workers_a_second_sigterm_ended_after_their_stop_lines_report_the_stop(tmp_path, shard):
    specs = [killed_after(0, OWN, 0.3), killed_after(1, OWN, 0.6)]
    status, err, report = supervised(tmp_path, [_shard_drained()] * shard + specs)
    assert status == 143, err
    headline = (
        f"worker 0 stopped by its own SIGTERM after step 8, with a checkpoint: {LATE_SIGTERM}"
    )
    assert headline in err, err
    assert "failed with signal" not in err and "server 0 exited" not in err, err
    hint = (
        "a checkpointed stop, not a crash: worker 0 got SIGTERM itself, and the ranks stopped "
        "together after step 8 with a checkpoint; to go on with this run"
    )
    assert hint in err, err
    ended = {k: report[k] for k in ("role", "rank", "exit_code", "signal", "signal_number")}
    assert ended == dict(role="worker", rank=0, exit_code=None, signal="SIGTERM", signal_number=15)
    assert report["cause"] == LATE_SIGTERM, report
    assert OWN in report["tail"], report


@pytest.mark.timeout(60)
def test_a_stop_that_sigint_ended_after_its_stop_line_reports_the_stop_and_exits_130(tmp_path):
    line = "distconv train: stopped by SIGINT after step 8"
    specs = [killed_after(r, line, 0.3 * (r + 1), signal.SIGINT) for r in (0, 1)]
    status, err, report = supervised(tmp_path, specs)
    assert status == 130, err
    assert (
        "worker 0 stopped by its own SIGINT after step 8, with a checkpoint: a later SIGINT" in err
    )
    assert "a checkpointed stop, not a crash: worker 0 got SIGINT itself" in err, err
    assert (report["signal"], report["exit_code"]) == ("SIGINT", None), report


@pytest.mark.timeout(60)
def test_the_worker_whose_own_signal_it_was_is_blamed_though_another_ended_first(tmp_path):
    """Rank 0's line says rank 1 got the signal; both were ended by a later one, rank 0 first:
    the report names rank 1, as for the same stop ended by exits 143."""
    specs = [killed_after(0, OTHER, 0.2), killed_after(1, OWN, 0.8)]
    status, err, report = supervised(tmp_path, specs)
    assert status == 143, err
    assert (report["rank"], report["signal"]) == (1, "SIGTERM"), report
    assert "worker 1 stopped by its own SIGTERM after step 8, with a checkpoint" in err, err
    assert "a checkpointed stop, not a crash: worker 1 got SIGTERM itself" in err, err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("late_first", [True, False], ids=["signalled-first", "stopped-first"])
def test_the_worker_a_repeated_signal_ended_is_blamed_beside_one_that_exited_143(
    tmp_path, late_first
):
    """Rank 1 alone got SIGTERM (a preemption agent's, to its pid) and the agent's second
    SIGTERM ended it after its stop line; rank 0 stopped with it and exited 143. The report
    named rank 0, whose line only says rank 1 got the signal: the rank whose own signal it was
    was looked for among the workers that exited 143 alone."""
    late, stopped = (0.2, 1.5) if late_first else (1.5, 0.2)
    specs = [stops(0, OTHER, stopped), killed_after(1, OWN, late)]
    status, err, report = supervised(tmp_path, specs)
    assert status == 143, err
    ended = {k: report[k] for k in ("role", "rank", "exit_code", "signal")}
    assert ended == dict(role="worker", rank=1, exit_code=None, signal="SIGTERM"), report
    headline = "worker 1 stopped by its own SIGTERM after step 8, with a checkpoint: "
    assert headline + LATE_SIGTERM in err, err
    assert "a checkpointed stop, not a crash: worker 1 got SIGTERM itself" in err, err


@pytest.mark.timeout(60)
def test_a_sigterm_before_any_stop_line_is_still_a_failure(tmp_path):
    """No stop line, so no checkpoint known to be written: the signal is the failure."""
    specs = [killed_after(0, "epoch 1/400", 0.2), stops(1, OWN, 30)]
    status, err, report = supervised(tmp_path, specs)
    assert status == 143, err
    assert "worker 0 failed with signal SIGTERM" in err, err
    assert "not a crash" not in err and report["cause"] is None, (err, report)


def _shard_killed(after: float = 0.2) -> ChildSpec:
    """A shard that a SIGTERM ends ``after`` seconds on: the second one, as it exited after its
    drain (Python takes its handlers back as the interpreter ends)."""
    body = f"import os, signal, time; time.sleep({after}); os.kill(os.getpid(), signal.SIGTERM)"
    return ChildSpec("server", 0, [sys.executable, "-c", body])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("late", [False, True], ids=["workers-exit-143", "workers-killed-too"])
def test_a_shard_a_second_sigterm_ended_after_its_drain_leaves_the_stop_reported(tmp_path, late):
    """The shard, drained for the workers' stop, was ended by the repeated SIGTERM as it
    exited: the launcher reported "server 0 failed with signal SIGTERM", the workers' stop
    with their checkpoint, and the way on from it, unsaid."""
    worker = killed_after if late else stops
    specs = [_shard_killed(), worker(0, OWN, 0.6), worker(1, OWN, 1.0)]
    status, err, report = supervised(tmp_path, specs)
    assert status == 143, err
    assert "server 0 failed" not in err, err
    assert "worker 0 stopped by its own SIGTERM after step 8, with a checkpoint" in err, err
    assert "a checkpointed stop, not a crash: worker 0 got SIGTERM itself" in err, err
    assert (report["role"], report["rank"]) == ("worker", 0), report


@pytest.mark.timeout(60)
def test_a_shard_a_sigterm_ended_while_its_workers_train_is_the_failure(tmp_path):
    specs = [_shard_killed(), stops(0, "epoch 1/400", 30), stops(1, "epoch 1/400", 30)]
    status, err, report = supervised(tmp_path, specs)
    assert status == 143, err
    assert "server 0 failed with signal SIGTERM" in err and "not a crash" not in err, err
    assert (report["role"], report["signal"]) == ("server", "SIGTERM"), report


class _SlowReader(io.BytesIO):
    """The launcher's output read slowly but steadily (a pager scrolled, a slow ssh link):
    each write (a piece of 4 KiB) takes :attr:`SECONDS`, far short of a stall, so the launcher
    waits for it and its queue fills, and then the pumps wait for room."""

    SECONDS = 0.01

    def write(self, data: bytes) -> int:  # type: ignore[override]
        time.sleep(self.SECONDS)
        return super().write(data)


#: lines enough to fill the launcher's output queue (4 MiB) and hold the pump up behind it
_FLOOD = "import sys; sys.stdout.write(('x' * 1023 + chr(10)) * 4400); sys.stdout.flush(); "


@pytest.mark.timeout(90)
def test_a_stop_line_still_in_the_pipe_at_the_exit_is_waited_for(tmp_path):
    """Rank 1 floods its output, says its stop line (rank 0 got the signal) and dies by a later
    SIGTERM, its pump held up behind the launcher's slow output; rank 0 exits 143 with its own
    line. Rank 1's tail lacked its stop line as the launcher judged its exit: taken for a
    failure of its own, it was reported at once, and the launcher's stop ended rank 0 by its
    SIGTERM before rank 0's own exit 143."""
    flood = ChildSpec(
        "worker",
        1,
        [
            sys.executable,
            "-c",
            f"{_FLOOD}import os, signal; print({OTHER!r}, flush=True); "
            "os.kill(os.getpid(), signal.SIGTERM)",
        ],
    )
    specs = [stops(0, OWN, 4), flood]
    status, err, report = supervised(tmp_path, specs, out=_SlowReader())
    assert status == 143, err
    assert (report["rank"], report["exit_code"]) == (0, 143), report
    assert "worker 0 stopped by its own SIGTERM after step 8, with a checkpoint (exit code" in err


@pytest.mark.timeout(60)
def test_a_stop_line_already_read_is_not_held_up_by_a_process_that_keeps_the_pipe(tmp_path):
    """Rank 0 leaves a process of its group behind (a pool's worker) that holds its output
    pipe, says its stop line and a later SIGTERM ends it: its line was read long before, but
    the launcher still waited for the pump's end, which that process holds off until the
    launcher's stop, the whole :data:`~launcher.own_stop.PUMP_END_SECONDS`, before it went on.
    Rank 0 writes the time it ends at; the launcher's report must follow well within it."""
    ended_at = tmp_path / "ended_at"
    body = (
        "import os, signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_DFL); "
        "subprocess.Popen(['sleep', '30']); "
        f"print({OWN!r}, flush=True); time.sleep(0.3); "
        f"open({str(ended_at)!r}, 'w').write(repr(time.time())); "
        "os.kill(os.getpid(), signal.SIGTERM)"
    )
    with_it = "distconv train: stopped after step 8: rank 0 got SIGTERM"
    specs = [ChildSpec("worker", 0, [sys.executable, "-c", body]), stops(1, with_it, 0.3)]
    status, err, report = supervised(tmp_path, specs)
    took = time.time() - float(ended_at.read_text())
    assert status == 143 and report["rank"] == 0, err
    assert took < PUMP_END_SECONDS - 0.5, (took, err)
    assert "worker 0 stopped by its own SIGTERM after step 8, with a checkpoint: " in err, err
