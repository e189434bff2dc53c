"""The equivalence check with a restart in the middle (:mod:`distconv.equivalence_restart`):
the ranks are stopped mid-epoch by SIGTERM, checkpointed, and resumed on new syncs and models.
A right transport passes it (in one process, and as processes over TCP on 127.0.0.1), and each
fault of the restore that the plain check cannot see (the loaded optimizer state on rank 0
alone, nowhere, or without Adam's step count) passes the plain check and fails this one,
naming the rank, the parameter and the difference."""

from __future__ import annotations

import re
import sys
import threading

import numpy as np
import pytest

from distconv.checkpoint import load_checkpoint
from distconv.equivalence import (
    JOB,
    RESUMED_JOB,
    Job,
    assert_matches_local,
    assert_rank_matches_local,
    max_relative_difference,
    reference_weights,
    weights,
)
from distconv.optim import create_optimizer
from distconv.resume import Preempted
from distconv.sync.local import LocalSync
from tests.child_env import child_env
from tests.equivalence_failures import assert_names_ranks_and_parameters
from tests.processes import job_left, run_job
from tests.sync.star_sync import (
    ChiefOnlyStateSync,
    DropsStateSync,
    NoStepCountSync,
    StarSync,
    star,
)

pytestmark = pytest.mark.timeout(60)


def test_the_stop_lands_mid_epoch_with_adam_s_state_far_from_zero(tmp_path):
    """What the resumed ranks restore: the checkpoint of the stop, in the second epoch (6
    steps each), every parameter's moments and step count under way."""
    job, sync = RESUMED_JOB, LocalSync(RESUMED_JOB.make_optimizer())
    try:
        with pytest.raises(Preempted, match="stopped by SIGTERM after step 8"):
            job.fit(job.model_of(0), sync, job.batch_size, 1, out_dir=tmp_path, stop_after=8)
    finally:
        sync.close()
    saved = load_checkpoint(tmp_path / "checkpoints" / "step-00000008" / "chief.safetensors")
    assert (saved.step, saved.epoch) == (8, 1)  # 2 steps into the second epoch
    for name, state in saved.optim_state.items():
        assert int(state["step"]) == 8, name
        assert np.abs(state["m"]).max() > 1e-6 and np.abs(state["v"]).max() > 0, name


def test_local_sync_stopped_and_resumed_matches_one_process_uninterrupted(tmp_path):
    """One rank in this process (the main thread, as the stop signal needs): LocalSync
    stopped after step 8 and a new LocalSync resumed end with the reference's weights."""
    sync = LocalSync(RESUMED_JOB.make_optimizer())
    try:
        got = assert_rank_matches_local(
            sync, RESUMED_JOB, world_size=1, restart=LocalSync, out_dir=tmp_path / "run"
        )
    finally:
        sync.close()
    assert sync.closed  # the check closed it at the stop, for the sync it resumed with
    assert max_relative_difference(got, weights(RESUMED_JOB.model_of(0))) > 1e-2  # trained
    assert (tmp_path / "run" / "checkpoints").is_dir()  # the chief wrote there


@pytest.mark.parametrize("world", [2, 3])
def test_a_right_transport_stopped_and_resumed_matches_one_process(tmp_path, world):
    ranks = assert_matches_local(star(StarSync, tmp_path / "meeting"), world, RESUMED_JOB)
    assert len(ranks) == world
    assert max_relative_difference(ranks[0], weights(JOB.model_of(0))) > 1e-2  # trained


@pytest.mark.parametrize(
    "kind, ranks",
    [
        (ChiefOnlyStateSync, "1"),  # rank 1 resumes Adam from zeros, rank 0 as it stood
        (DropsStateSync, "01"),  # every rank resumes Adam from zeros
        (NoStepCountSync, "01"),  # the moments restored, the bias correction of step 1
    ],
)
def test_a_wrong_restore_passes_the_plain_check_and_fails_the_restart(tmp_path, kind, ranks):
    assert_matches_local(star(kind, tmp_path / "plain"), 2)  # invisible without a restart
    with pytest.raises(AssertionError) as failed:
        assert_matches_local(star(kind, tmp_path / "restart"), 2, RESUMED_JOB)
    assert_names_ranks_and_parameters(str(failed.value), ranks)


def test_a_restart_the_check_cannot_run_is_a_value_error(tmp_path):
    sync = LocalSync(JOB.make_optimizer())
    run = tmp_path / "run"
    try:
        with pytest.raises(ValueError, match="a job with restart_at needs restart"):
            assert_rank_matches_local(sync, RESUMED_JOB, world_size=1, restart=LocalSync)
        with pytest.raises(ValueError, match="restart and out_dir are for a job that restarts"):
            assert_rank_matches_local(sync, world_size=1, restart=LocalSync, out_dir=run)
        with pytest.raises(ValueError, match="restart_at must be an int >= 1"):
            assert_rank_matches_local(
                sync, Job(restart_at=-1), world_size=1, restart=LocalSync, out_dir=run
            )
    finally:
        sync.close()
    with pytest.raises(ValueError, match="out_dir is for a job that restarts"):
        assert_matches_local(star(StarSync, tmp_path / "m"), 2, out_dir=run)


def test_a_stop_past_the_job_s_end_is_a_value_error_before_it_trains(tmp_path):
    """The job has 18 steps: a stop asked for after step 19 never comes."""
    sync = LocalSync(JOB.make_optimizer())
    try:
        with pytest.raises(
            ValueError, match=r"restart_at=19 is past the job's last, step 18 \(3 epochs of 6\)"
        ):  # fmt: skip
            assert_rank_matches_local(
                sync, Job(restart_at=19), world_size=1, restart=LocalSync, out_dir=tmp_path / "r"
            )
    finally:
        sync.close()
    assert not (tmp_path / "r").exists()  # refused before it trained


def test_a_stop_the_ranks_agree_on_past_the_job_s_end_is_refused_before_any_rank_starts(
    tmp_path,
):
    """Step 19 is past the job's last (18): refused before any rank starts (each rank once
    trained the whole job to say so, wrapped in a rank's failure). Step 17, which 2 ranks
    agree on at the fit's last step, is not (the test below)."""
    with pytest.raises(
        ValueError, match=r"restart_at=19 is past the job's last, step 18"
    ):  # fmt: skip
        assert_matches_local(star(StarSync, tmp_path / "meeting"), 2, Job(restart_at=19))
    assert not (tmp_path / "meeting").exists()  # no rank started


def test_a_stop_in_the_job_s_last_steps_comes_at_its_last_step_and_resumes_right(tmp_path):
    """Step 17 of 18 under 2 ranks comes after the last multiple of 8: the ranks agree on the
    stop at the fit's last step, 18, and the resumed ranks train no step, only that epoch's
    end. It was refused as a stop after step 24 that would never come."""
    ranks = assert_matches_local(star(StarSync, tmp_path / "meeting"), 2, Job(restart_at=17))
    assert len(ranks) == 2


def test_a_restart_with_another_optimizer_is_refused(tmp_path):
    sync = LocalSync(JOB.make_optimizer())

    def other(optimizer):
        return LocalSync(create_optimizer("adam", lr=0.02))

    try:
        with pytest.raises(ValueError, match="the sync's optimizer is .*'lr': 0.02"):
            assert_rank_matches_local(
                sync, RESUMED_JOB, world_size=1, restart=other, out_dir=tmp_path
            )
    finally:
        sync.close()


def test_a_restart_outside_the_main_thread_is_refused_before_it_trains(tmp_path):
    """SIGTERM reaches only the main thread's fit: elsewhere it would end the process."""
    sync, raised = LocalSync(JOB.make_optimizer()), []

    def rank() -> None:
        try:
            assert_rank_matches_local(
                sync, RESUMED_JOB, world_size=1, restart=LocalSync, out_dir=tmp_path / "run"
            )
        except ValueError as exc:
            raised.append(str(exc))

    thread = threading.Thread(target=rank)
    thread.start()
    thread.join(30)
    sync.close()
    assert raised and "only a fit in the main thread takes" in raised[0], raised
    assert not (tmp_path / "run").exists()  # refused before it trained


_FIT_IN_A_THREAD = """
import sys, threading
from distconv.equivalence import RESUMED_JOB as job
from distconv.sync.local import LocalSync

def fit():
    sync = LocalSync(job.make_optimizer())
    try:
        job.fit(job.model_of(0), sync, job.batch_size, 1, out_dir=sys.argv[1], stop_after=8)
    except ValueError as refused:
        print("refused:", refused)
    finally:
        sync.close()

thread = threading.Thread(target=fit)
thread.start()
thread.join()
print("alive")
"""


def test_a_fit_stopped_by_itself_outside_the_main_thread_is_refused_not_the_process_ended(
    tmp_path,
):
    """Job.fit(stop_after=n) in a thread: no handler there takes the SIGTERM, which would end
    the whole process (its status 143); it is refused before it trains, in its own process
    here so that the fault would not end pytest's."""
    (tmp_path / "fit.py").write_text(_FIT_IN_A_THREAD)
    argv = [sys.executable, str(tmp_path / "fit.py"), str(tmp_path / "run")]
    ran = run_job(argv, child_env(), timeout=60)
    assert ran.returncode == 0, (ran.returncode, ran.stderr)
    assert "refused: a job with restart_at is stopped by SIGTERM" in ran.stdout, ran.stdout
    assert ran.stdout.endswith("alive\n"), ran.stdout
    assert not (tmp_path / "run").exists()  # refused before it trained


_CHECK_WITH_SIGTERM_BLOCKED = """
import signal, sys
from distconv.equivalence import RESUMED_JOB, assert_rank_matches_local
from distconv.sync.local import LocalSync

signal.signal(signal.SIGTERM, lambda signum, frame: print("the script's handler ran"))
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
sync = LocalSync(RESUMED_JOB.make_optimizer())
try:
    assert_rank_matches_local(
        sync, RESUMED_JOB, world_size=1, restart=LocalSync, out_dir=sys.argv[1]
    )
except ValueError as refused:
    print("refused:", refused)
finally:
    sync.close()
print("pending:", sorted(signal.sigpending()))
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
"""


def test_a_restart_where_sigterm_is_blocked_is_refused_before_it_trains(tmp_path):
    """A blocked SIGTERM stays pending through the fit: the stop never came, and the signal
    reached the script's own handler once it unblocked it, a stop it was never sent."""
    (tmp_path / "check.py").write_text(_CHECK_WITH_SIGTERM_BLOCKED)
    argv = [sys.executable, str(tmp_path / "check.py"), str(tmp_path / "run")]
    ran = run_job(argv, child_env(), timeout=60)
    assert ran.returncode == 0, (ran.returncode, ran.stderr)
    assert "refused: a job with restart_at is stopped by SIGTERM, which this thread blocks" in (
        ran.stdout
    )
    assert "pending: []" in ran.stdout, ran.stdout
    assert "handler ran" not in ran.stdout, ran.stdout
    assert not (tmp_path / "run").exists()  # refused before it trained


_CHECK_ASKED_TO_STOP = """
import signal, sys, threading
from distconv.equivalence import RESUMED_JOB, assert_rank_matches_local
from distconv.resume import Preempted
from distconv.sync.local import LocalSync

class AskedToStop(LocalSync):
    \"\"\"LocalSync whose process is asked to stop (by a scheduler, by a person) in step 3.\"\"\"

    steps = 0

    def start_step(self, examples):
        super().start_step(examples)
        AskedToStop.steps += 1
        if AskedToStop.steps == 3:
            signal.pthread_kill(threading.get_ident(), getattr(signal, sys.argv[2]))

sync = AskedToStop(RESUMED_JOB.make_optimizer())
try:
    assert_rank_matches_local(
        sync, RESUMED_JOB, world_size=1, restart=LocalSync, out_dir=sys.argv[1]
    )
    print("went on")
except Preempted as stop:
    print("stopped:", stop, stop.exit_status)
finally:
    sync.close()
print("steps:", AskedToStop.steps)
"""


@pytest.mark.parametrize("signum, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_stop_the_process_is_asked_for_is_raised_not_taken_for_the_check_s(
    tmp_path, signum, status
):
    """A Ctrl-C or a scheduler's SIGTERM in step 3, before the check's own stop: the fit stops
    there with a checkpoint, and the check raises its Preempted for the script to stop, where
    it took that stop for its own and trained the job to its end."""
    (tmp_path / "check.py").write_text(_CHECK_ASKED_TO_STOP)
    argv = [sys.executable, str(tmp_path / "check.py"), str(tmp_path / "run"), signum]
    ran = run_job(argv, child_env(), timeout=60)
    assert ran.returncode == 0, (ran.returncode, ran.stderr)
    assert f"stopped: stopped by {signum} after step 3 {status}" in ran.stdout, ran.stdout
    assert "went on" not in ran.stdout and "steps: 3" in ran.stdout, ran.stdout


_FAILING_CHECK = """
import functools, os, sys, tempfile
from distconv.equivalence import RESUMED_JOB, assert_matches_local
from tests.sync.star_sync import ChiefOnlyStateSync
if __name__ == "__main__":
    try:
        assert_matches_local(
            functools.partial(ChiefOnlyStateSync, meeting=sys.argv[1]), 2, RESUMED_JOB
        )
    except AssertionError as failed:
        print("failed:", failed)
    print("left:", sorted(os.listdir(tempfile.gettempdir())))
"""


def test_the_check_s_own_folder_and_processes_are_gone_when_it_fails(tmp_path):
    """The checkpoints go to a folder the check makes under TMPDIR and removes, failed or not;
    the ranks are gone with it."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "check.py").write_text(_FAILING_CHECK)
    env = child_env(TMPDIR=str(tmp_path / "tmp"))
    argv = [sys.executable, str(tmp_path / "check.py"), str(tmp_path / "meeting")]
    ran = run_job(argv, env, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert re.search(r"^rank 1 of 2: parameter '\w+\.\w+' is ", ran.stdout, re.M), ran.stdout
    assert "left: []" in ran.stdout, ran.stdout
    assert not job_left(ran.env, 1), "a rank outlived the check"


def test_the_reference_of_a_restarted_job_is_the_uninterrupted_one():
    """The stop is the ranks' alone: one process trains the job in one go."""
    expected, got = reference_weights(2), reference_weights(2, RESUMED_JOB)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
