"""One stop delivered twice is one stop; a second one asks to stop now.

GNU ``timeout`` signals its child, then its whole process group, microseconds apart, so a
launcher under it got SIGTERM twice (where the first was taken before the second came), took
the second for a person's "stop now" and SIGKILLed every worker in its checkpoint: "got
SIGTERM during the stop: server-0, worker-0, worker-1 killed without the rest of the grace",
and no checkpoint. A signal within :data:`~launcher.second_signal.REPEAT_SECONDS` of the first
is now the same stop, said once; a later one, or a person's second Ctrl-C (a terminal's, here
a pseudo-terminal the launcher runs in the foreground of), still kills what is left.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from launcher.second_signal import KEYSTROKE_SECONDS, REPEAT_SECONDS, same_stop
from tests.launcher.launch_cli import signal_taken, wait_while_running
from tests.launcher.real_children import mpiexec_or_skip
from tests.launcher.test_preempt_signals import (
    ENV,
    JOB,
    LOCAL,
    MPI,
    ended,
    log,
    trained_epoch_1,
)
from tests.launcher.test_stopping import checkpointing, done_at
from tests.processes import job_env, job_left

#: what the launcher says of a signal that repeats the first stop: why nothing was killed, and
#: what kills what is left (a person who signalled twice meant that)
SAME_STOP = (
    "distconv-launch: got SIGTERM again within 1 s of the first: the same stop, so the children "
    "keep their grace; to kill them now, signal again more than 1 s after the first\n"
)
#: the ways a second SIGTERM comes on the heels of the first: the pid again, or its group
#: (``timeout``'s ``kill(0, sig)``: the launcher leads its own group here)
AGAIN = {
    "pid": lambda pid: os.kill(pid, signal.SIGTERM),
    "group": lambda pid: os.killpg(pid, signal.SIGTERM),
}
#: the Ctrl-C a terminal sends its foreground group when it reads it (ISIG)
CTRL_C = b"\x03"
#: the operations guide
OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _train(
    tmp_path: Path, env: Mapping[str, str], how: tuple = LOCAL, epochs: int = 400
) -> subprocess.Popen:
    """A real ``distconv-launch`` job (``how``: ``local``'s 2 workers and 1 shard, or ``mpi``'s
    2 ranks; synthetic data, long enough to be stopped), the launcher leading a process group
    of its own, as under ``timeout``; its output in ``tmp_path``'s ``out.txt`` and ``err.txt``."""
    argv = [
        sys.executable, "-m", "launcher", *how, "--job-id", JOB, "--",
        "--data", "synthetic", "--epochs", str(epochs), "--batch-size", "64", "--no-progress",
    ]  # fmt: skip
    with open(tmp_path / "out.txt", "w") as out, open(tmp_path / "err.txt", "w") as err:
        return subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=out, stderr=err, process_group=0
        )


def _stopped_twice(tmp_path: Path, again: str, how: tuple = LOCAL, epochs: int = 400) -> str:
    """The stderr of a real job (:func:`_train`) sent SIGTERM once it trained epoch 1, then
    again at once (``again``: :data:`AGAIN`'s way), having checked that it ended once: exit
    143, nothing killed, the same stop said once, no process of the job left."""
    watched = "mpiexec-0" if how == MPI else "worker-0"
    with job_env(ENV) as env:
        launcher = _train(tmp_path, env, how, epochs)
        try:
            trained_epoch_1(tmp_path, launcher, watched)
            signal_taken(launcher, signal.SIGTERM)  # the next one a second, not merged into it
            AGAIN[again](launcher.pid)
            status, err = ended(launcher, tmp_path)
        finally:
            launcher.kill()
            launcher.wait()
        assert job_left(env, 5) == {}
    assert status == 143, err[-3000:]
    assert "during the stop" not in err and "killed without" not in err, err[-3000:]
    assert err.count(SAME_STOP) == 1, err[-3000:]
    return err


def _checkpointed(tmp_path: Path, step: str) -> None:
    """Assert that the job's checkpoint of ``step`` was written."""
    checkpoint = tmp_path / "runs" / JOB / "train" / "checkpoints" / f"step-{int(step):08d}"
    assert checkpoint.is_dir(), sorted(checkpoint.parent.iterdir())


@pytest.mark.timeout(150)
@pytest.mark.parametrize("again", sorted(AGAIN))
def test_a_sigterm_delivered_twice_stops_the_job_once_with_its_checkpoint(tmp_path, again):
    err = _stopped_twice(tmp_path, again)
    said = [log(tmp_path, f"worker-{rank}") for rank in (0, 1)]
    steps = [re.search(r"stopped by SIGTERM after step (\d+)", words) for words in said]
    assert None not in steps, (said, err[-3000:])
    (step,) = {m.group(1) for m in steps}  # the ranks agreed on it
    way_on = "to go on with this run, give the same command (and --resume auto after --"
    assert err.splitlines()[-2:] == [  # the job names its run (--job-id): the way on, last
        "distconv-launch: stopped by SIGTERM",
        f"distconv-launch: {way_on}, where the program takes it)",
    ], err[-3000:]
    _checkpointed(tmp_path, step)


@pytest.mark.timeout(150)
def test_a_sigterm_delivered_twice_to_an_mpi_launch_keeps_each_rank_s_checkpoint(tmp_path):
    """``distconv-launch mpi`` under ``timeout``: its one ``mpiexec`` is stopped once, and
    every rank checkpoints, where the group's SIGTERM killed mpiexec's group in the ranks'
    checkpoint."""
    mpiexec_or_skip()
    # timeout's kill(0, SIGTERM); MPI's ranks train faster
    err = _stopped_twice(tmp_path, "group", MPI, epochs=20000)
    said = log(tmp_path, "mpiexec-0")
    stops = re.findall(r"\[([01])\] distconv train: stopped by SIGTERM after step (\d+)", said)
    assert sorted(rank for rank, _ in stops) == ["0", "1"], (said[-3000:], err[-3000:])
    (step,) = {step for _, step in stops}  # the ranks agreed on it
    _checkpointed(tmp_path, step)


def _stand_in(tmp_path: Path, seconds: float, **popen: object) -> subprocess.Popen:
    """``distconv-launch local`` of one stand-in worker that checkpoints for ``seconds`` at
    its SIGTERM (:func:`checkpointing`: ``w.up``, ``w.term``, ``w.done`` in ``tmp_path``),
    its grace far longer; its stderr in ``err.txt``."""
    argv = [sys.executable, "-m", "launcher", "local", "--workers", "1", "--servers", "0"]
    argv += ["--grace", "60", "--run-dir", "run", "--", *checkpointing(tmp_path, "w", seconds)]
    with open(tmp_path / "err.txt", "w") as err:
        return subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err, **popen)


def _stopped(tmp_path: Path, launcher: subprocess.Popen) -> tuple[int, str, float]:
    """The launcher's status, its stderr and the seconds it took to end."""
    began = time.monotonic()
    status, err = ended(launcher, tmp_path, 30)
    return status, err, time.monotonic() - began


def _up(tmp_path: Path, launcher: subprocess.Popen) -> None:
    """Once the stand-in worker has its SIGTERM handler in place."""
    wait_while_running((tmp_path / "w.up").exists, launcher, "the worker's handler")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("again", sorted(AGAIN))
def test_a_sigterm_past_the_window_still_kills_what_is_left(tmp_path, again):
    with job_env(ENV) as env:
        launcher = _stand_in(tmp_path, 30, env=env, process_group=0)
        try:
            _up(tmp_path, launcher)
            signal_taken(launcher, signal.SIGTERM)
            time.sleep(REPEAT_SECONDS + 0.3)
            AGAIN[again](launcher.pid)
            status, err, took = _stopped(tmp_path, launcher)
        finally:
            launcher.kill()
            launcher.wait()
        assert job_left(env, 5) == {}
    assert status == 143 and took < 10, (took, err)
    assert done_at(tmp_path, "w") is None, err
    assert "got SIGTERM during the stop: worker-0 killed without the rest of the grace" in err
    assert "the same stop" not in err, err


@contextmanager
def _in_a_terminal(tmp_path: Path, seconds: float) -> Iterator[tuple[subprocess.Popen, int]]:
    """:func:`_stand_in` leading a session whose controlling terminal is a new
    pseudo-terminal, its stdin, in that terminal's foreground group (where the terminal sends
    a Ctrl-C); yields the launcher and the terminal's master end, to type into."""
    master, slave = os.openpty()
    try:
        with job_env(ENV) as env:
            launcher = _stand_in(
                tmp_path, seconds, env=env, stdin=slave, start_new_session=True,
                preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
            )  # fmt: skip
            try:
                yield launcher, master
            finally:
                launcher.kill()
                launcher.wait()
            assert job_left(env, 5) == {}
    finally:
        os.close(slave)
        os.close(master)


@pytest.mark.timeout(60)
def test_a_second_ctrl_c_within_the_window_still_kills_what_is_left(tmp_path):
    with _in_a_terminal(tmp_path, 30) as (launcher, master):
        _up(tmp_path, launcher)
        os.write(master, CTRL_C)
        time.sleep(0.3)  # a person's second press: sooner than the window, later than a wrapper
        os.write(master, CTRL_C)
        status, err, took = _stopped(tmp_path, launcher)
    assert status == 130 and took < 10, (took, err)
    assert done_at(tmp_path, "w") is None, err
    assert "got SIGINT during the stop: worker-0 killed without the rest of the grace" in err


@pytest.mark.timeout(60)
def test_a_ctrl_c_a_wrapper_sends_on_too_is_the_same_stop(tmp_path):
    """``timeout --foreground`` or a shell script's ``trap`` in the terminal's foreground
    group gets the Ctrl-C too, and sends it on to the launcher: one keystroke, whose two
    copies come in either order; here the wrapper's first, the terminal's a moment later."""
    with _in_a_terminal(tmp_path, 1.0) as (launcher, master):
        _up(tmp_path, launcher)
        signal_taken(launcher, signal.SIGINT)  # the wrapper's copy, taken
        os.write(master, CTRL_C)
        status, err, _ = _stopped(tmp_path, launcher)
    assert status == 130, err
    assert done_at(tmp_path, "w") is not None, f"the worker was killed in its checkpoint: {err}"
    assert "got SIGINT again within 1 s of the first: the same stop" in err, err
    assert "during the stop" not in err, err


@pytest.mark.timeout(60)
def test_a_sigint_twice_without_a_terminal_is_the_same_stop(tmp_path):
    """Under setsid, systemd or a pod without a tty the launcher has no controlling terminal:
    the Ctrl-C check's open of /dev/tty, in the SIGINT handler, fails at once, so a SIGINT
    0.3 s after the first (a script's or a scheduler's, no keystroke) is the first stop
    again, and the worker keeps its checkpoint."""
    with job_env(ENV) as env:
        launcher = _stand_in(tmp_path, 1.0, env=env, start_new_session=True)
        try:
            _up(tmp_path, launcher)
            signal_taken(launcher, signal.SIGINT)
            time.sleep(3 * KEYSTROKE_SECONDS)  # a person's second Ctrl-C would kill by now
            launcher.send_signal(signal.SIGINT)
            status, err, _ = _stopped(tmp_path, launcher)
        finally:
            launcher.kill()
            launcher.wait()
        assert job_left(env, 5) == {}
    assert status == 130, err
    assert done_at(tmp_path, "w") is not None, f"the worker was killed in its checkpoint: {err}"
    assert "got SIGINT again within 1 s of the first: the same stop" in err, err
    assert "during the stop" not in err, err


def test_the_operations_guide_gives_the_window_the_keystroke_and_the_words():
    """Each number and line the guide states is built from the code's own."""
    text = " ".join(OPERATIONS.read_text().split())
    assert f"more than {REPEAT_SECONDS:g} s after the first" in text
    assert f"at least {KEYSTROKE_SECONDS:g} s after the first" in text
    assert f"`distconv-launch: {same_stop('SIGTERM')}`" in text
