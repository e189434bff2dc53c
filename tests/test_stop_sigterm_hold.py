"""A checkpointed stop holds SIGTERM off until its command ends with the stop's 143 (a second
SIGTERM while the process wound down killed it by the signal, -15), and puts the handler back
when the command runs in-process, as a notebook or a test runs ``distconv.cli.main``."""

from __future__ import annotations

import signal
import sys

from distconv import stop_request


def test_the_hold_ignores_sigterm_and_its_release_puts_the_handler_back():
    before = signal.getsignal(signal.SIGTERM)
    try:
        stop_request.hold_sigterm_until_exit()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        stop_request.hold_sigterm_until_exit()  # a second hold keeps the first's handler
        stop_request.release_sigterm_hold()
        assert signal.getsignal(signal.SIGTERM) is before
        stop_request.release_sigterm_hold()  # nothing held: nothing changed
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGTERM, before)


def test_main_run_in_process_puts_sigterm_back_after_a_stop(tmp_path):
    """``distconv.cli.main([...])`` stopped by SIGTERM returns 143 to its caller, which goes on
    with SIGTERM handled as before (the hold stayed: the process could no longer be stopped)."""
    from tests.test_stop_kept_lines import TRAIN, _stopped

    call = ["train", *TRAIN, "--out", "run"]
    code = f"import signal, sys; from distconv.cli import main; status = main({call!r}); "
    code += "print('default SIGTERM:', signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "
    code += "file=sys.stderr); sys.exit(status)"
    status, lines = _stopped(tmp_path, [sys.executable, "-c", code])
    assert status == 143, lines
    assert lines[-1] == "default SIGTERM: True", lines[-3:]


def test_train_called_in_process_puts_sigterm_back_as_it_raises_the_stop(tmp_path):
    """``distconv.job.train`` holds no SIGTERM off (only the command does, from its stop line
    to its exit): a caller of the API that catches the stop goes on with SIGTERM handled as
    before, not held off for good (nothing but SIGKILL could stop it then)."""
    from tests.test_stop_kept_lines import _stopped

    code = (
        "import logging, signal, sys\n"
        "from distconv.job import TrainConfig, train\n"
        "from distconv.stop_request import Preempted\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
        "config = TrainConfig(data='synthetic', epochs=2, batch_size=1, progress=False,\n"
        "                     out='run')\n"
        "try:\n"
        "    train(config)\n"
        "except Preempted as stop:\n"
        "    print('caught:', stop, file=sys.stderr)\n"
        "print('default SIGTERM:', signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,\n"
        "      file=sys.stderr)\n"
    )
    status, lines = _stopped(tmp_path, [sys.executable, "-c", code])
    assert status == 0, lines[-5:]
    assert any(line.startswith("caught: ") for line in lines), lines[-5:]
    assert lines[-1] == "default SIGTERM: True", lines[-3:]
