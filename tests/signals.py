"""Signals in tests: children, and a test's own process, that take Ctrl-C as in a terminal,
and a fit signalled mid-way or in its evaluation. No pytest here: a rank that mpiexec starts
imports this module too (the fixture that goes with it: :mod:`tests.sigint_fixture`).

A script's ``&`` and ``nohup`` start pytest with SIGINT ignored, and an ignored signal stays
ignored across ``exec``: a child would then rightly leave SIGINT alone, and a test of what
Ctrl-C does would fail for a reason that is not the code's.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any


def sigint_as_in_a_terminal() -> None:
    """``preexec_fn`` for :class:`subprocess.Popen`: the child starts with SIGINT's default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def signal_at(trainer: Any, step: int, *signums: int, pid: int | None = None) -> Callable[..., Any]:
    """Make ``trainer`` send its own process (or process ``pid``: a shard it talks to)
    ``signums`` right after its step ``step``, where a person's Ctrl-C or a scheduler's SIGTERM
    would land: in the middle of a fit. Returns the ``train_step`` it wrapped, to put back."""
    train_step = trainer.train_step

    def signalled(*args: Any) -> Any:
        out = train_step(*args)
        if trainer.pos.step == step:
            for signum in signums:
                os.kill(os.getpid() if pid is None else pid, signum)
        return out

    trainer.train_step = signalled
    return train_step


def signal_in_evaluation_after(trainer: Any, step: int, signum: int = signal.SIGTERM) -> None:
    """Make ``trainer`` send its process ``signum`` in the evaluation after its step ``step``:
    past the fit's last stop check, where a scheduler's stop (or a person's Ctrl-C) lands
    during a long test set."""
    evaluate = trainer.evaluate

    def signalled(*args: Any, **kwargs: Any) -> Any:
        if trainer.pos.step == step:
            os.kill(os.getpid(), signum)
        return evaluate(*args, **kwargs)

    trainer.evaluate = signalled
