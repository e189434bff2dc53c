"""The failure report as the launcher says it: one error message on stderr, the failed child's
last lines under it, and the same in ``<run_dir>/failure.json``
(:func:`launcher.failure.write_report`); then where the run stands, as a stop's report says it:
the newest checkpoint it kept and the command that goes on (:class:`~launcher.go_on.WayOn`),
which ``failure.json`` carries too, with its time in ISO 8601 beside the Unix one."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from distconv.files import describe_os_error, write_atomically

from .failure import Failure, write_report
from .go_on import go_on_after_stop, way_on_after_failure
from .messages import Messages
from .shown import shown

#: what ``failure.json`` holds beyond the failure's entry (:func:`launcher.failure.report_entry`),
#: which each line of ``restarts.jsonl`` holds alone: the time in ISO 8601 and the way on
REPORT_ONLY = ("time_utc", "checkpoint_step", "checkpoint", "go_on")


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
    command gave its own; ``train``: the ``distconv train`` arguments, None for a program), and
    otherwise the newest checkpoint kept and the command that goes on once the cause is fixed
    (:func:`way_on_after_failure`), in ``failure.json`` too (:func:`add_to_report`)."""
    path = run_dir / "failure.json"
    written, kept = write_report(path, failure, max_restarts, then)
    way_on = way_on_after_failure(job_id, train, failure.diverged, run_dir)
    if kept is not None and (problem := add_to_report(kept, way_on.fields())) is not None:
        written += f" (without the checkpoint and the way on: {problem})"  # said below
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
    kept_at = {"checkpoint": way_on.checkpoint} if way_on.checkpoint is not None else {}
    messages.say(go_on_after_stop(failure, job_id, train) or way_on.line, paths=kept_at)


def add_to_report(path: Path, fields: Mapping[str, object]) -> str | None:
    """Add ``fields`` to the report written at ``path``, and ``time_utc`` beside its ``time``
    (ISO 8601, as an operator reads it: ``time`` is seconds since 1970), replacing it whole.
    Returns why it could not (a disk that filled since), else None: the report written first
    stays, and the message on stderr says all the fields say."""
    try:
        entry = json.loads(path.read_text())
        entry = {**with_time_utc(entry), **fields}
        write_atomically(path, [(json.dumps(entry, indent=2) + "\n").encode()])
    except OSError as exc:
        return describe_os_error(exc)
    return None


def with_time_utc(entry: Mapping[str, object]) -> dict[str, object]:
    """``entry`` with ``time_utc`` right after its ``time`` (a Unix time), the same moment in
    ISO 8601 (``2026-12-07T20:34:59.123Z``, as ``launch.json``'s ``started``)."""
    stamped: dict[str, object] = {}
    for key, value in entry.items():
        stamped[key] = value
        if key == "time" and isinstance(value, (int, float)):
            moment = datetime.fromtimestamp(value, timezone.utc)
            stamped["time_utc"] = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return stamped


def _last_lines(failure: Failure) -> str:
    """What the report's header calls the lines under it: the last lines of the child's log, or,
    where the log could not be written (a full disk), the launcher's own, which the log lacks."""
    if failure.log_error is None:
        return f"last lines of {shown(failure.log)}"
    return f"last lines (its log {shown(failure.log)} could not be written: {failure.log_error})"
