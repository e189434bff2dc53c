"""Progress bar, timers, a JSON-lines metrics log and the loss/accuracy plot.

Nothing here needs more than the standard library, except :func:`plot_metrics`, which imports
matplotlib (Agg, no display) only when called.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO


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
    forced = os.environ.get("DISTCONV_PROGRESS", "").strip()
    if forced:
        return forced not in ("0", "false", "no", "off")
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


class Timer:
    """Wall-clock time, summed over every ``with timer:`` block.

    Attributes:
        total: seconds spent inside the blocks so far.
        count: how many blocks ran.
    """

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0
        self._start: float | None = None

    def __enter__(self) -> Timer:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.total += time.perf_counter() - self._start
        self.count += 1
        self._start = None

    @property
    def mean(self) -> float:
        """Seconds per block (0 before the first)."""
        return self.total / self.count if self.count else 0.0


class MetricsWriter:
    """Appends one JSON object per line (one per epoch) to a file, flushed at once.

    Args:
        path: the ``.jsonl`` file; its directory must exist.
        keep_through_epoch: None starts the file afresh. An int keeps the existing records whose
            ``epoch`` is at most this (a resumed run's checkpoint epoch) and drops the rest,
            which a crashed run wrote after its last checkpoint and the resumed run will redo.
    """

    def __init__(self, path: str | os.PathLike, keep_through_epoch: int | None = None) -> None:
        self.path = Path(path)
        kept = []
        if keep_through_epoch is not None and self.path.exists():
            kept = [r for r in read_metrics(self.path) if r.get("epoch", 0) <= keep_through_epoch]
        self.records: list[dict[str, Any]] = kept
        with open(self.path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in kept)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` (JSON-able values) as one line."""
        line = json.dumps(dict(record))
        with open(self.path, "a") as f:
            f.write(line + "\n")
        self.records.append(dict(record))


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a JSON-lines file (blank lines skipped)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def plot_metrics(
    records: Sequence[Mapping[str, Any]],
    path: str | os.PathLike,
    title: str = "",
) -> None:
    """Draw loss and accuracy against epoch, train and test side by side, into a PNG.

    Keys missing from the records (no test set, say) are left out of the plot.
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
    fig.savefig(path, dpi=100)


def _series(records: Iterable[Mapping[str, Any]], key: str) -> tuple[list, list]:
    pairs = [(r["epoch"], r[key]) for r in records if r.get(key) is not None]
    return [p[0] for p in pairs], [p[1] for p in pairs]
