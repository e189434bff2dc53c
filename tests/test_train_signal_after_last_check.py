"""``distconv train`` signalled after its fit's last stop check (in the last evaluation, as it
writes its last checkpoint, metrics and plot): the run finished, and the process ends as a
finished run, exit 0. It logged the library's warning for a script of several fits, that "a
later fit of this process" stops by the signal and that ``drop_carried()`` drops it: a command
has neither. It says in its own words that the run finished all the same.

A real ``distconv train`` process, which sends itself the signal from its last evaluation."""

from __future__ import annotations

import signal
import sys

import pytest

from tests.child_env import child_env
from tests.processes import run_job
from tests.signals import sigint_as_in_a_terminal

pytestmark = pytest.mark.timeout(120)

#: ``distconv train`` with the Trainer's evaluation after its last step sending this process
#: the signal named by the first argument; the rest are the command's
SIGNALLED_IN_LAST_EVALUATION = """\
import os, signal, sys
from distconv import cli
from distconv.trainer import Trainer
from tests.signals import signal_in_evaluation_after

make = Trainer.__init__


def made(self, *args, **kwargs):
    make(self, *args, **kwargs)
    signal_in_evaluation_after(self, 48, signal.Signals[sys.argv[1]])


Trainer.__init__ = made
sys.exit(cli.main(sys.argv[2:]))
"""
#: a run of one epoch of 48 steps
TRAIN = ["train", "--data", "synthetic", "--batch-size", "8", "--epochs", "1", "--no-progress"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_the_last_check_lets_the_run_finish_and_says_so(tmp_path, signum):
    argv = [sys.executable, "-c", SIGNALLED_IN_LAST_EVALUATION, signum.name, *TRAIN, "--out", "r"]
    done = run_job(
        argv, env=child_env(), timeout=90, cwd=tmp_path, preexec_fn=sigint_as_in_a_terminal
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("test accuracy "), done.stdout  # the run's own last line
    assert "drop_carried" not in done.stderr and "a later fit" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"distconv train: {signum.name} came after the last stop check, as the run wrote its "
        "last files: it finished all the same, its last checkpoint and metrics written; "
        "nothing is left to go on with"
    ), done.stderr[-2000:]
    assert (tmp_path / "r" / "checkpoints" / "step-00000048.json").is_file()
