"""A stop a fit received and did not stop by is the process's next fit's: a SIGTERM in a fit's
last evaluation, after its last stop check, stopped nothing, and the script's next fit, which
started a request of its own, forgot it, training on until the scheduler's SIGKILL. A stop a
fit did stop by (or the second Ctrl-C's interrupt) is done, and no later fit stops by it.

Real signals, sent by the process to itself from inside the fit. (Several ranks:
``tests/mpi/test_stop_last_steps.py``.)
"""

from __future__ import annotations

import logging
import os
import signal

import pytest

from distconv import stop_request
from distconv.resume import Preempted
from distconv.sync.errors import SyncError
from tests.sigint_fixture import python_handles_sigint  # noqa: F401 (autouse)
from tests.signals import signal_at, signal_in_evaluation_after
from tests.test_resume_checks import _trainer

#: what a fit that hands on a SIGTERM it did not stop by says
HANDED_ON = (
    "this process got SIGTERM after a fit's last stop check, and no fit has stopped by it yet: "
    "a later fit of this process, if any, stops by it at its first check "
    "(distconv.stop_request.drop_carried() drops it)"
)
#: what the fit that a carried SIGTERM stops says at its start
TAKEN_IN = (
    "this fit stops at its first stop check, if any, by the SIGTERM an earlier fit of this "
    "process got after its last one (distconv.stop_request.drop_carried() before a fit drops it)"
)


def test_a_sigterm_in_a_fits_last_evaluation_stops_the_next_fit(data, tmp_path, caplog):
    train, test = data
    t = _trainer(tmp_path)
    signal_in_evaluation_after(t, 15)  # epoch 1's last step
    with caplog.at_level(logging.WARNING, logger="distconv.trainer"):
        assert len(t.fit(train, test, epochs=1)) == 1  # whole: no check after its evaluation
    # said where it happened: the next fit may start much later (a notebook's next cell)
    assert HANDED_ON in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="distconv.trainer"):
        with pytest.raises(Preempted, match="stopped by SIGTERM after step 16") as info:
            t.fit(train, test, epochs=2, resume=True)
    assert TAKEN_IN in caplog.text  # said where it stops, too: the first warning is far back
    assert info.value.exit_status == 143
    assert len(t.fit(train, test, epochs=2, resume=True)) == 1  # answered: done with


def test_a_stop_carried_into_another_trainers_fit_stops_it_too(data, tmp_path):
    train, test = data
    first = _trainer(tmp_path / "first")
    signal_in_evaluation_after(first, 15)
    first.fit(train, test, epochs=1)
    with pytest.raises(Preempted, match=r"(?m)stopped by SIGTERM after step 1$"):
        _trainer(tmp_path / "second").fit(train, test, epochs=1)


def test_the_second_ctrl_cs_interrupt_is_no_later_fits_stop(data, tmp_path):
    train, test = data
    t = _trainer(tmp_path)
    step = signal_at(t, 5, signal.SIGINT, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        t.fit(train, test, epochs=1)
    t.train_step = step
    assert len(t.fit(train, test, epochs=1, resume="overwrite")) == 1 and t.pos.step == 15


def test_a_ctrl_c_before_the_next_fits_handlers_answers_the_carried_one(data, tmp_path):
    """The first Ctrl-C came in a fit's last evaluation; the person pressed it again in the
    next fit's setup, where Python's own handler raised KeyboardInterrupt: that answered it,
    and a fit after (a notebook's next cell) stopped after its first step all the same."""
    train, test = data
    t = _trainer(tmp_path)
    signal_in_evaluation_after(t, 15, signal.SIGINT)
    assert len(t.fit(train, test, epochs=1)) == 1  # whole: no check after its evaluation
    setup = t.sync.setup

    def interrupted_setup(*args):
        os.kill(os.getpid(), signal.SIGINT)  # no handler of the fit's yet: Python's raises
        return setup(*args)

    t.sync.setup = interrupted_setup
    with pytest.raises(KeyboardInterrupt):
        t.fit(train, test, epochs=2, resume=True)
    assert len(_trainer(tmp_path / "next").fit(train, test, epochs=1)) == 1


def test_a_stop_that_ended_a_fit_in_an_error_is_no_later_fits_stop(data, tmp_path):
    """A Ctrl-C in a step whose wait then gave up on it (a parameter server's shard silent
    past the stop's patience raises SyncError) ended that fit: the error answered it. It was
    handed on all the same, with a warning that it came after the fit's last stop check, and
    the next fit (a notebook's next cell, once the shard is back) stopped after its first step."""
    train, test = data
    t = _trainer(tmp_path)
    step = t.train_step

    def given_up(*args):
        out = step(*args)
        if t.pos.step == 5:
            os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C: a stop, at the next check
            raise SyncError("asked to stop (SIGINT), and pserver shard(s) 0 gave no answer")
        return out

    t.train_step = given_up
    with pytest.raises(SyncError, match="asked to stop"):
        t.fit(train, test, epochs=1)
    t.train_step = step
    assert len(t.fit(train, test, epochs=1, resume="overwrite")) == 1 and t.pos.step == 15


def test_a_carried_stop_dropped_stops_no_later_fit(data, tmp_path):
    """The way out the warning names, for a notebook whose next fit is not the same job."""
    train, test = data
    t = _trainer(tmp_path)
    signal_in_evaluation_after(t, 15)
    t.fit(train, test, epochs=1)
    assert stop_request.drop_carried() == {signal.SIGTERM}
    assert stop_request.drop_carried() == frozenset()  # once
    assert len(_trainer(tmp_path / "next").fit(train, test, epochs=1)) == 1


def _shard_gone(*args):
    raise SyncError("pserver shard(s) 0 gave no answer: not the stop's")


@pytest.mark.parametrize("where", ["setup", "first step"])
def test_a_carried_stop_outlives_a_fit_an_error_ended_before_its_first_check(
    data,
    tmp_path,
    caplog,
    where,
):
    """A script's retry after an error must still stop by the scheduler's SIGTERM, not train on
    to its SIGKILL: an error in the next fit's setup (before the stop is taken in), or in its
    first step (after the fit said it stops by it), was not that stop, and answered nothing.
    The one in a step dropped it, silently, after the warning that the fit stops by it."""
    train, test = data
    first = _trainer(tmp_path / "first")
    signal_in_evaluation_after(first, 15)
    first.fit(train, test, epochs=1)
    failing = _trainer(tmp_path / "failing")
    if where == "first step":
        failing.train_step = _shard_gone
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="distconv.trainer"):
        with pytest.raises(Exception, match="no complete checkpoint|not the stop's"):
            failing.fit(train, test, epochs=1, resume=where == "setup")
    assert (HANDED_ON in caplog.text) is (where == "first step")  # said in that cell, too
    with pytest.raises(Preempted, match=r"(?m)stopped by SIGTERM after step 1$"):
        _trainer(tmp_path / "next").fit(train, test, epochs=1)
