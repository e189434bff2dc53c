"""Progress bar, a JSON-lines metrics log and the loss/accuracy plot.

Nothing here needs more than the standard library, except :func:`plot_metrics`, which imports
matplotlib (Agg, no display) only when called.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from distconv import strict_json
from distconv.files import describe_os_error, naming, write_atomically
from distconv.messages import env_switch
from distconv.run_line import software_changed
from distconv.scheme_history import EARLIER, is_asynchronous

log = logging.getLogger("distconv.metrics")


class ProgressBar:
    """A one-line progress bar redrawn in place on a terminal.

    It draws only when ``stream`` is a TTY (so logs and CI output stay clean) unless forced with
    ``enabled=True`` or ``DISTCONV_PROGRESS=1``; ``DISTCONV_PROGRESS=0`` turns it off.

    Args:
        total: the number of steps in the task.
        desc: a label in front of the bar.
        stream: where to draw; stderr by default.
        enabled: force drawing on or off; None decides as above.
        min_interval: seconds between redraws, so a fast loop is not slowed by drawing.

    Example:
        >>> bar = ProgressBar(len(batches), "epoch 1")
        >>> for b in batches:
        ...     bar.update(loss=0.3)
        >>> bar.close()
    """

    width = 30

    def __init__(
        self,
        total: int,
        desc: str = "",
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        min_interval: float = 0.1,
    ) -> None:
        self.total = max(int(total), 0)
        self.desc = desc
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _bar_enabled(self.stream) if enabled is None else enabled
        self.min_interval = min_interval
        self.count = 0
        self.postfix: dict[str, Any] = {}
        self._start = time.perf_counter()
        self._last_draw = -float("inf")

    def update(self, n: int = 1, **postfix: Any) -> None:
        """Advance by ``n`` steps; ``postfix`` values (loss=...) are shown after the bar."""
        self.count += n
        self.postfix.update(postfix)
        now = time.perf_counter()
        if self.enabled and (now - self._last_draw >= self.min_interval or self.done):
            self._last_draw = now
            self.stream.write("\r" + self.render(now - self._start))
            self.stream.flush()

    @property
    def done(self) -> bool:
        return self.count >= self.total

    def render(self, elapsed: float) -> str:
        """The bar's text after ``elapsed`` seconds."""
        frac = min(self.count / self.total, 1.0) if self.total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        rate = self.count / elapsed if elapsed > 0 else 0.0
        extra = " ".join(f"{k}={_fmt(v)}" for k, v in self.postfix.items())
        head = f"{self.desc} " if self.desc else ""
        return f"{head}[{bar}] {self.count}/{self.total} {rate:.1f} it/s {extra}".rstrip()

    def close(self) -> None:
        """End the line, so what is printed next starts on a fresh one."""
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bar_enabled(stream: TextIO) -> bool:
    forced = env_switch("DISTCONV_PROGRESS")
    if forced is not None:
        return forced
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


class MetricsError(ValueError):
    """A damaged metrics log; the message names the file and the line."""


class MetricsWriteError(OSError):
    """The metrics log cannot be written (a full disk): an OSError of the cause's errno and the
    log's path, worded as a checkpoint's write error is, naming the file and the cause."""

    def __str__(self) -> str:
        return f"cannot write metrics log {self.filename}: {describe_os_error(self)}"


def _unwritable(exc: OSError, path: Path) -> OSError:
    """``exc`` as a :class:`MetricsWriteError` of ``path``; one with no errno (a library's
    ``OSError("message")``) keeps its own message."""
    return (
        naming(exc, path)
        if exc.errno is None
        else MetricsWriteError(exc.errno, exc.strerror, str(path))
    )


#: the key of a metrics log's first line under which it says which run it is
#: (:func:`~distconv.run_line.run_line`: the run's settings and job id)
RUN = "run"


class MetricsWriter:
    """Appends one JSON object per line (one per epoch) to a file, flushed at once.

    Args:
        path: the ``.jsonl`` file; its directory must exist.
        keep_through_epoch: None starts the file afresh. An int keeps the existing records whose
            ``epoch`` is at most this (a resumed run's checkpoint epoch) and drops the rest,
            which a crashed run wrote after its last checkpoint and the resumed run will redo.
        run: which run this is (:func:`~distconv.run_line.run_line`: its settings and job id),
            written on the log's first line under :data:`RUN`, as ``scheme`` is: a sweep's
            logs, collected or their folders reused, said nothing of their learning rate,
            optimizer, seed or job. A resumed log that keeps its first line keeps what that
            says (a resume continues the run it began), unless the resume runs other software
            (:func:`~distconv.run_line.software_changed`): then its first line says its own
            run too, so the switch shows where it happened; None writes none.

    The file is replaced atomically when it is trimmed or started, so a crash at any moment
    leaves either the old history or the new one, never an empty file. Each line is on disk
    before :meth:`write` returns, so it survives whenever the checkpoint written after it does;
    a resumed log that still lacks a line up to ``keep_through_epoch`` (lost some other way)
    draws a warning, since nothing writes that line again.

    Raises:
        MetricsError: a resumed run's log is damaged other than by a torn last line.
        MetricsWriteError: the log cannot be written (a full disk); :meth:`write` raises it too.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        keep_through_epoch: int | None = None,
        run: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = Path(path)
        self.run = dict(run) if run is not None else None
        kept = []
        if keep_through_epoch is not None and self.path.exists():
            kept = [r for r in read_metrics(self.path) if self._epoch(r) <= keep_through_epoch]
        self.records: list[dict[str, Any]] = kept
        self._kept = len(kept)  # the lines a resume kept: its first line is the one after them
        try:  # a full disk: '[Errno 28] ...' was the only failure of a run not worded as such
            write_atomically(self.path, [b"".join(_line(r) for r in kept)])
        except OSError as exc:
            raise _unwritable(exc, self.path) from None
        if keep_through_epoch:
            self._warn_of_holes(keep_through_epoch)

    @property
    def appended(self) -> int:
        """The lines this writer appended to the log (its fit's epochs), after those it kept:
        the log it rewrote at its start holds nothing new before the first."""
        return len(self.records) - self._kept

    def _warn_of_holes(self, through: int) -> None:
        have = {self._epoch(r) for r in self.records}
        missing = [e for e in range(1, through + 1) if e not in have]
        if missing:
            log.warning(
                "%s has no line for epoch(s) %s of the %d the resumed checkpoint has finished; "
                "they will not be written again",
                self.path,
                missing,
                through,
            )

    def _epoch(self, record: Mapping[str, Any]) -> float:
        epoch = record.get("epoch", 0)
        if isinstance(epoch, bool) or not isinstance(epoch, (int, float)):
            raise MetricsError(f"{self.path}: a record's epoch is {epoch!r}, not a number")
        return epoch

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` (JSON-able values) as one line, and wait until it is on disk. A NaN
        or infinite number (a test loss that overflowed) is written ``null``, which strict
        JSON parsers read. The log's first line carries the run (:data:`RUN`) too, and so
        does a resume's first under other software than the kept lines' (see the class)."""
        if self.run is not None and len(self.records) == self._kept:
            in_force = next((r[RUN] for r in reversed(self.records) if RUN in r), None)
            if not self.records or software_changed(in_force, self.run):
                record = {**record, RUN: self.run}
        line = _line(record)
        try:
            with open(self.path, "ab") as f:
                f.write(line)
                f.flush()
                # the epoch's checkpoint follows, synced: a host crash must not keep it and
                # lose this line, which a resume from it would never write again
                os.fsync(f.fileno())
        except OSError as exc:
            raise _unwritable(exc, self.path) from None
        self.records.append(dict(record))


def _line(record: Mapping[str, Any]) -> bytes:
    return (strict_json.dumps(dict(record)) + "\n").encode()


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a JSON-lines file (blank lines skipped).

    A last line without its newline that does not parse is what a crash mid-append leaves: it
    is dropped with a warning.

    Raises:
        MetricsError: any other line is not a JSON object; the message names file and line.
    """
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    records = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            if number == len(lines):  # no newline after it: torn by a crash mid-write
                log.warning("%s: dropping a torn last line (%d bytes)", path, len(raw))
                break
            raise MetricsError(f"{path}, line {number}: not valid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise MetricsError(
                f"{path}, line {number}: expected a JSON object, got {type(record).__name__}"
            )
        records.append(record)
    return records


def plot_metrics(
    records: Sequence[Mapping[str, Any]],
    path: str | os.PathLike,
    title: str = "",
) -> bool:
    """Draw loss and accuracy against epoch, train and test side by side, into a PNG.

    Keys missing from the records (no test set, say) are left out of the plot. The file is
    replaced atomically: a failed write (a full disk) leaves the plot before it whole.

    Returns:
        Whether the plot was written. One that cannot be (a full disk) is a warning naming the
        file and the cause, not an error: a run draws it once every metrics line and checkpoint
        is on disk, and the log holds what it shows; failing there told a finished run as
        failed, and its restart on the same disk failed again.

    Raises:
        OSError: matplotlib cannot draw it in the format the name says, naming the file.
    """
    from matplotlib.figure import Figure  # without pyplot: no global state, no display needed
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(10, 4), layout="constrained")
    panels = (("loss", "loss"), ("acc", "accuracy"))
    for ax, (key, label) in zip(fig.subplots(1, 2), panels):
        for split in ("train", "test"):
            xs, ys = _series(records, f"{split}_{key}")
            if xs:
                ax.plot(xs, ys, marker="o", markersize=3, label=split)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.legend()
    if title:
        fig.suptitle(title)
    image = io.BytesIO()
    try:  # the format the name says, as savefig(path) reads it
        fig.savefig(image, format=Path(path).suffix[1:] or "png", dpi=100)
    except OSError as exc:
        raise naming(exc, path) from None
    # whole or not at all: savefig into the file emptied the last plot first, and a full disk
    # then left a truncated one where a whole one was
    try:
        write_atomically(path, [image.getvalue()])
    except OSError as exc:
        why = describe_os_error(exc)
        log.warning("cannot write the plot %s: %s; the metrics are in their log", path, why)
        return False
    return True


def _series(records: Iterable[Mapping[str, Any]], key: str) -> tuple[list, list]:
    pairs = [(r["epoch"], r[key]) for r in records if r.get(key) is not None]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def summary(record: dict[str, Any], epochs: int) -> str:
    """One log line for an epoch's record: its losses, accuracies, seconds (and the most a
    rank of them waited for the others: :func:`_waiting`), rate, and an asynchronous run's
    pushes applied and dropped."""
    parts = [f"epoch {record['epoch']}/{epochs}"]
    for key in ("train_loss", "train_acc", "test_loss", "test_acc"):
        if key in record:
            parts.append(f"{key} {record[key]:.4f}")
    seconds = f"{record['seconds']:.1f}s"
    # the most a rank waited for the others between steps; a rank alone waits for none (its
    # record's figure is the sums' own bookkeeping, which said "0.0s waiting" at every epoch)
    if "collective_seconds" in record and record.get("world_size", 1) > 1:
        seconds += f" ({_waiting(record)})"
    parts.append(seconds)
    parts.append(
        f"{record['examples_per_second']:.0f} ex/s (global batch {record['global_batch']})"
    )
    if "push_messages_applied" in record:  # an asynchronous run's (summed over ranks)
        applied, dropped = record["push_messages_applied"], record["push_messages_dropped"]
        parts.append(f"pushes {applied} applied, {dropped} dropped{_async_steps(record)}")
    return "  ".join(parts)


def _waiting(record: Mapping[str, Any]) -> str:
    """The most a rank waited for the others in each place: its steps' exchanges, where a
    synchronous or allreduce run's fast ranks wait for a straggler (a record of a sync that
    keeps no such time has none), and the Trainer's collectives, where an asynchronous run's
    do; the collectives alone said "0.0s waiting" on every rank while one stalled 20 s."""
    collectives = f"{record['collective_seconds']:.1f}s"
    exchanges = [w for w in record.get("sync_seconds_per_rank") or () if w is not None]
    if not exchanges:
        return f"{collectives} waiting in collectives"
    return f"{max(exchanges):.1f}s waiting in step exchanges, {collectives} in collectives"


def _async_steps(record: Mapping[str, Any]) -> str:
    """Where an epoch resumed in its middle under another scheme (its
    :data:`~distconv.scheme_history.EARLIER`) ran only some of its steps asynchronously, its push
    counts are those steps' alone: which steps those were, ``(its async steps, to step 6)``
    where the earlier steps were async, ``after step 6`` where the later ones are (else the line
    read as an epoch of async updates half lost). Nothing where every step was async, or the
    epoch was not resumed under another scheme (a pure async epoch's record has no ``scheme``
    after a fit's first). An earlier scheme no checkpoint recorded (null) is not known to be
    async."""
    if EARLIER not in record:
        return ""
    ends = [(e["scheme"], e["to_step"]) for e in record[EARLIER]]
    ends.append((record.get("scheme"), None))  # the epoch's last steps, to its end
    if all(is_asynchronous(scheme) for scheme, _ in ends):
        return ""
    spans, before = [], None
    for scheme, to_step in ends:
        if is_asynchronous(scheme):
            spans.append(_span(before, to_step))
        before = to_step
    return f" (its async steps, {' and '.join(spans)})" if spans else ""


def _span(before: int | None, to_step: int | None) -> str:
    """The steps after step ``before`` (None: from the epoch's first) to ``to_step`` (None: to
    its last), as :func:`_async_steps` names them."""
    if to_step is None:
        return f"after step {before}"
    if before is None:
        return f"to step {to_step}"
    return f"step {to_step}" if to_step == before + 1 else f"steps {before + 1} to {to_step}"
