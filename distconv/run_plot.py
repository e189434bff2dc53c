"""When a run's plot (``metrics.png``) is drawn: at a fit's end, and at its orderly stop.

The plot is drawn from the metrics log, which holds every epoch's line; it is a picture of
that log and nothing else. A fit that ends by completing its epochs draws it, and so does one
stopped in order (SIGTERM, the first Ctrl-C: :class:`~distconv.stop_request.Preempted`), once
its stop checkpoint is on disk: a long job stopped and resumed by its scheduler otherwise kept
the plot of its first fit beside a log of hundreds of epochs, which read as a run that stopped
learning there. An error (or a second Ctrl-C) draws nothing: it removes the plot instead, where
the fit wrote lines the plot lacks (:func:`remove_stale_plot`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from distconv.metrics import MetricsWriter, plot_metrics
from distconv.run_files import PLOT
from distconv.stop_request import Preempted

log = logging.getLogger("distconv.trainer")  # said at a fit's end, as its other lines


def draw_plot(writer: MetricsWriter, out_dir: Path) -> None:
    """Draw the plot of every line ``writer``'s log holds into ``out_dir``, if it holds any.

    Raises:
        OSError: matplotlib cannot draw the plot (see :func:`plot_metrics`; a full disk is a
            warning, not an error).
    """
    if writer.records:
        plot_metrics(writer.records, out_dir / PLOT, title=out_dir.name)


def plot_after(error: BaseException, writer: MetricsWriter, out_dir: Path) -> None:
    """Bring the plot up to date once ``error`` ended a fit that wrote its log, without
    hiding ``error``: nothing here raises, but for an error of the interpreter itself.

    A stop (:class:`Preempted`) draws it: the stop's checkpoint is on disk already, and the
    draw (matplotlib's import alone takes about half a second) comes well inside a scheduler's
    grace period; a plot no older than the log is left as it is. A second Ctrl-C during the
    draw stops it, and the stop goes on to its status as it would have.

    Any other error draws none, and removes the plot where this fit wrote lines it lacks
    (:func:`remove_stale_plot`): the error must reach its caller (an MPI abort, a launcher's
    restart) without a second's delay, a second Ctrl-C asks to stop at once, and a draw after
    a full disk or a lack of memory may fail itself. Nothing is lost: the log holds every
    line, and the next fit that ends or stops draws them.
    """
    plot = out_dir / PLOT
    try:
        if isinstance(error, Preempted) and not plot_is_current(plot, writer.path):
            draw_plot(writer, out_dir)
            return
    except KeyboardInterrupt:  # a second Ctrl-C in the draw: the stop it asked for now
        pass
    except Exception as exc:  # the stop is what the caller hears of, not the plot
        log.warning("cannot draw the plot %s: %s; the metrics are in their log", plot, exc)
    remove_stale_plot(plot, writer)


def remove_stale_plot(plot: Path, writer: MetricsWriter) -> None:
    """Remove ``plot`` where ``writer`` appended lines to its log after it was drawn (it shows
    fewer epochs than the log holds), saying so. A plot of every line the log held at the
    fit's start stays, though the log's rewrite at that start made it the newer file: a
    resume that failed before its first epoch's end removed the plot of a whole run."""
    metrics = writer.path
    try:
        if not writer.appended or plot_is_current(plot, metrics) or not plot.exists():
            return
        plot.unlink()
    except OSError as exc:  # the error that ended the fit comes first
        log.warning("cannot remove the plot %s, older than %s: %s", plot, metrics.name, exc)
        return
    log.info("removed %s, older than %s: the next fit to end or stop draws it", plot, metrics.name)


def plot_is_current(plot: Path, metrics: Path) -> bool:
    """Whether ``plot`` exists and is no older than the log ``metrics`` (the plot is drawn
    after the log's last line)."""
    try:
        return os.stat(plot).st_mtime_ns >= os.stat(metrics).st_mtime_ns
    except OSError:  # either one missing
        return False
