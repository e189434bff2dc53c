"""The failure report as the launcher says it: one error message on stderr, the failed child's
last lines under it, and the same in ``<run_dir>/failure.json``
(:func:`launcher.failure.write_report`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .failure import Failure, write_report
from .go_on import go_on_after_stop
from .messages import Messages
from .shown import shown


def report_failure(
    messages: Messages,
    run_dir: Path,
    failure: Failure,
    max_restarts: int,
    then: str | None,
    job_id: str | None = None,
    train: Sequence[str] | None = None,
) -> None:
    """``failure`` on ``messages`` (the launcher's stderr) and in ``run_dir``'s
    ``failure.json`` (``then``: what came after it, as ``stopped by SIGTERM``, or a restart
    that could not start); where it is a checkpointed stop, then how to go on with the run
    (:func:`go_on_after_stop`: ``job_id`` is the one to add to the command, None where the
    command gave its own; ``train``: the ``distconv train`` arguments, None for a program)."""
    path = run_dir / "failure.json"
    written, kept = write_report(path, failure, max_restarts, then)
    tail = [f"    {line}" for line in failure.tail] or ["    (no output)"]
    after = f"; then {then}" if then else ""
    messages.say(
        f"{failure.describe()} (after {failure.restart} restart(s)){failure.stopped_too()}"
        f"{after}; {_last_lines(failure)}:",
        level="error",
        report=kept,  # where it was written: the message dropped, the report is there
        more=[*tail, written],
        paths={"log": failure.log},
    )
    if hint := go_on_after_stop(failure, job_id, train):
        messages.say(hint)


def _last_lines(failure: Failure) -> str:
    """What the report's header calls the lines under it: the last lines of the child's log, or,
    where the log could not be written (a full disk), the launcher's own, which the log lacks."""
    if failure.log_error is None:
        return f"last lines of {shown(failure.log)}"
    return f"last lines (its log {shown(failure.log)} could not be written: {failure.log_error})"
