"""A fit stops on SIGTERM or the first Ctrl-C with a checkpoint, and at once on a second Ctrl-C.

Real signals, sent by the process to itself from inside a training step, so each lands where
a person's Ctrl-C would: in the middle of a fit.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from distconv.resume import Preempted
from distconv.run_dir import RunDirectory
from distconv.stop_request import StopRequest, stop_signal
from tests.child_env import child_env
from tests.launcher.c_handler import C_HANDLER_ON_SIGTERM, SIGTERM_ENDS_IT
from tests.sigint_fixture import python_handles_sigint  # noqa: F401 (autouse)
from tests.signals import signal_at
from tests.test_resume_checks import _trainer, _weights


def _steps_saved(out):
    return [m.step for m in RunDirectory(out).manifests()]


def test_the_first_ctrl_c_checkpoints_and_stops_with_130_and_a_resume_ends_as_one_run(
    data, tmp_path, capfd
):
    train, test = data
    whole = _trainer(tmp_path / "whole")
    whole.fit(train, test, epochs=2)
    t = _trainer(tmp_path / "split")
    step = signal_at(t, 20, signal.SIGINT)
    with pytest.raises(Preempted, match="stopped by SIGINT after step 20") as info:
        t.fit(train, test, epochs=2)
    assert info.value.exit_status == 130
    assert "Ctrl-C: stopping at the next step" in capfd.readouterr().err
    assert _steps_saved(tmp_path / "split") == [15, 20]  # epoch 1, then where it stopped
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    t.train_step = step
    assert [r["epoch"] for r in t.fit(train, test, epochs=2, resume=True)] == [2]
    for name, value in _weights(whole).items():
        np.testing.assert_array_equal(_weights(t)[name], value, err_msg=name)


def test_a_second_ctrl_c_stops_at_once_without_a_checkpoint(data, tmp_path):
    train, test = data
    t = _trainer(tmp_path)
    signal_at(t, 5, signal.SIGINT, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        t.fit(train, test, epochs=1)
    assert t.pos.step == 5  # raised right after step 5, where the first asked for a stop
    assert _steps_saved(tmp_path) == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_and_ctrl_c_together_stop_as_sigterm(data, tmp_path):
    train, test = data
    t = _trainer(tmp_path)
    signal_at(t, 5, signal.SIGINT, signal.SIGTERM)
    with pytest.raises(Preempted, match="stopped by SIGTERM after step 5") as info:
        t.fit(train, test, epochs=1)
    assert info.value.exit_status == 143 and _steps_saved(tmp_path) == [5]


@pytest.mark.parametrize("kind", ["ignored", "own handler"])
def test_a_sigint_the_program_handles_itself_or_ignores_is_left_alone(data, tmp_path, kind):
    train, test = data
    calls = []
    own = signal.SIG_IGN if kind == "ignored" else (lambda signum, frame: calls.append(signum))
    previous = signal.signal(signal.SIGINT, own)
    try:
        t = _trainer(tmp_path)
        signal_at(t, 5, signal.SIGINT)
        assert len(t.fit(train, test, epochs=1)) == 1 and t.pos.step == 15  # trained on
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, previous)
    assert calls == ([] if kind == "ignored" else [signal.SIGINT])


def test_the_handlers_go_back_when_a_fit_ends_and_a_new_fit_forgets_an_old_signal(data, tmp_path):
    train, test = data
    t = _trainer(tmp_path)
    signal_at(t, 3, signal.SIGTERM)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Preempted):
        t.fit(train, test, epochs=1)
    assert signal.getsignal(signal.SIGTERM) is before
    t.train_step = type(t).train_step.__get__(t)
    assert len(t.fit(train, test, epochs=1, resume=True)) == 1 and t.pos.step == 15


def test_each_test_here_runs_with_pythons_own_sigint_handler(request):
    """The tests above need Python's SIGINT handler whatever an earlier test in the worker left
    (a fit that failed half-way with its handler in place): the autouse fixture applies only
    where it is imported at the module's top, not in a child's script."""
    assert "python_handles_sigint" in request.fixturenames
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_ranks_stop_by_sigterm_if_any_got_it_else_by_ctrl_c():
    assert stop_signal([0.0, 0.0]) is None
    assert stop_signal([0.0, 2.0]) == signal.SIGINT
    assert stop_signal([1.0, 1.0]) == signal.SIGTERM
    request = StopRequest(announce=False)
    request.received.add(signal.SIGINT)
    assert request.flags == [0.0, 1.0]
    assert Preempted("x", 130).__reduce__()[1] == ("x", 130)  # a pickled one keeps its status


def test_a_ctrl_c_that_cannot_be_announced_still_asks_for_the_stop(monkeypatch):
    """``distconv train 2>&1 | tee log``: Ctrl-C reaches tee too; the announcement meets EPIPE."""

    def broken(fd, data):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("distconv.stop_request.os.write", broken)
    request = StopRequest(announce=True)
    request._on_signal(signal.SIGINT, None)
    assert request.flags == [0.0, 1.0]


def test_the_command_lines_last_line_after_a_stop_may_meet_a_broken_pipe(monkeypatch):
    import io
    import sys

    from distconv import cli

    class Broken(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    def stopped(args):
        raise Preempted("stopped by SIGINT after step 8", 130)

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(sys, "stderr", Broken())
    args = parser.parse_args(["train", "--data", "synthetic"])
    monkeypatch.setattr(parser, "parse_args", lambda argv=None: args)
    monkeypatch.setattr(args, "handler", stopped, raising=False)
    assert cli.main([]) == 130


_CTRL_C_UNDER_JSON_LOG = """
import os, signal
from distconv.logs import configure_logging
from distconv.runtime import Runtime
from distconv.stop_request import StopRequest
signal.signal(signal.SIGINT, signal.default_int_handler)
configure_logging(Runtime(), fmt="json")
restore = StopRequest(announce=True).install()
os.kill(os.getpid(), signal.SIGINT)
restore()
"""


def _run_python(script: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -c SCRIPT`` in ``cwd``, importing this checkout, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-c", script], env=child_env(), cwd=cwd, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip


def test_the_ctrl_c_announcement_is_a_json_line_under_the_json_log(tmp_path):
    """``--log-format json``: every line on stderr is JSON (docs/operations.md), the stop's
    announcement too, or a collector parsing the pod's output refuses it."""
    import json

    done = _run_python(_CTRL_C_UNDER_JSON_LOG, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(e["level"], e["message"].split(":")[0]) for e in lines] == [("warning", "distconv")]
    assert "Ctrl-C again stops at once" in lines[0]["message"]


@pytest.mark.timeout(30)
def test_a_sigterm_handler_set_outside_python_is_given_back_as_the_default(tmp_path):
    """A SIGTERM handler set outside Python (an embedding program's) reads as None; a fit's
    restore gave it back with ``signal.signal(SIGTERM, None)``, which raises TypeError: the
    fit ended in it, and its own handler stayed in, keeping every later SIGTERM."""
    script = f"""{C_HANDLER_ON_SIGTERM}from distconv.stop_request import StopRequest
StopRequest(announce=False).install()()
print("restored", flush=True)
{SIGTERM_ENDS_IT}"""
    done = _run_python(script, tmp_path)
    assert done.stdout == "restored\n", done.stderr[-2000:]
    assert done.returncode == -signal.SIGTERM
