"""A fit stopped in order (SIGTERM, the first Ctrl-C) draws the plot of its whole log, and one
ended by an error leaves no plot older than its log: a long job stopped by its scheduler had
no plot at all, or the plot of its first fit beside a log of hundreds of epochs.

Real fits writing real files, stopped by real signals sent from inside a step (where a
scheduler's SIGTERM or a person's Ctrl-C lands).
"""

from __future__ import annotations

import signal
import sys

import pytest

import distconv.run_plot
from distconv.metrics import read_metrics
from distconv.resume import Preempted
from distconv.run_plot import plot_is_current
from tests.sigint_fixture import python_handles_sigint  # noqa: F401 (autouse)
from tests.signals import signal_at
from tests.test_resume_checks import _trainer


def _plot_and_log(out):
    return out / "metrics.png", out / "metrics.jsonl"


def test_a_stop_draws_the_plot_of_every_epoch_the_log_holds(data, tmp_path):
    train, test = data
    t = _trainer(tmp_path)
    signal_at(t, 35, signal.SIGTERM)  # in epoch 3: epochs 1 and 2 have their lines
    with pytest.raises(Preempted, match="stopped by SIGTERM after step 35"):
        t.fit(train, test, epochs=5)
    plot, log = _plot_and_log(tmp_path)
    assert [r["epoch"] for r in read_metrics(log)] == [1, 2]
    assert plot_is_current(plot, log), "no plot, or one older than the log, after a stop"


def test_a_resumed_fit_stopped_by_ctrl_c_redraws_the_plot_of_its_first_fit(data, tmp_path):
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=1)
    plot, log = _plot_and_log(tmp_path)
    first = plot.stat().st_mtime_ns
    t = _trainer(tmp_path)
    signal_at(t, 50, signal.SIGINT)  # in epoch 4 (steps 46-60): epochs 2 and 3 added
    with pytest.raises(Preempted, match="stopped by SIGINT after step 50"):
        t.fit(train, test, epochs=5, resume=True)
    assert [r["epoch"] for r in read_metrics(log)] == [1, 2, 3]
    assert plot.stat().st_mtime_ns > first and plot_is_current(plot, log)


def test_a_second_ctrl_c_removes_the_plot_older_than_the_log_and_draws_none(data, tmp_path):
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=1)
    t = _trainer(tmp_path)
    signal_at(t, 35, signal.SIGINT, signal.SIGINT)  # epoch 2's line written at step 30
    with pytest.raises(KeyboardInterrupt):
        t.fit(train, test, epochs=5, resume=True)
    plot, log = _plot_and_log(tmp_path)
    assert [r["epoch"] for r in read_metrics(log)] == [1, 2]
    assert not plot.exists(), "the plot of epoch 1 alone stayed beside a log of two epochs"


def test_a_second_ctrl_c_during_the_stops_draw_ends_the_draw_and_the_stop_stands(
    data, tmp_path, monkeypatch
):
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=1)
    draw = distconv.run_plot.draw_plot

    def ctrl_c_in_the_draw(*args):  # the person presses Ctrl-C again while it draws
        signal.raise_signal(signal.SIGINT)
        draw(*args)

    monkeypatch.setattr(distconv.run_plot, "draw_plot", ctrl_c_in_the_draw)
    t = _trainer(tmp_path)
    signal_at(t, 35, signal.SIGINT)
    with pytest.raises(Preempted, match="stopped by SIGINT after step 35") as info:
        t.fit(train, test, epochs=5, resume=True)
    assert info.value.exit_status == 130
    plot, log = _plot_and_log(tmp_path)
    assert not plot.exists(), "the plot of epoch 1 alone stayed beside a log of two epochs"
    assert [r["epoch"] for r in read_metrics(log)] == [1, 2]


def test_a_resume_cut_short_before_its_first_line_keeps_the_plot_of_the_whole_log(data, tmp_path):
    """The resume rewrote the log at its start, which made the whole run's plot the older file:
    a second Ctrl-C (or an error) before the resume's first epoch ended removed it."""
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=2)
    plot, log = _plot_and_log(tmp_path)
    drawn = plot.stat().st_mtime_ns
    t = _trainer(tmp_path)
    signal_at(t, 33, signal.SIGINT, signal.SIGINT)  # in epoch 3, its line not written
    with pytest.raises(KeyboardInterrupt):
        t.fit(train, test, epochs=5, resume=True)
    assert [r["epoch"] for r in read_metrics(log)] == [1, 2]
    assert plot.exists(), "the plot of both epochs the log holds was removed"
    assert plot.stat().st_mtime_ns == drawn


@pytest.mark.parametrize(("step", "epochs_after"), [(33, [1, 2]), (50, [1, 2, 3])])
def test_a_stop_whose_draw_fails_to_import_matplotlib_still_stops_and_says_why(
    data, tmp_path, monkeypatch, caplog, step, epochs_after
):
    """matplotlib's import failing at the stop (a broken install) is a warning naming the plot
    and the cause; the stop keeps its status, the plot of the lines the log held at the fit's
    start stays, and one the fit's own lines made older than the log goes."""
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=2)
    plot, log = _plot_and_log(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # its import raises
    t = _trainer(tmp_path)
    signal_at(t, step, signal.SIGTERM)
    with pytest.raises(Preempted, match=f"stopped by SIGTERM after step {step}") as info:
        t.fit(train, test, epochs=5, resume=True)
    assert info.value.exit_status == 143
    assert [r["epoch"] for r in read_metrics(log)] == epochs_after
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(f"cannot draw the plot {plot}: " in m and "matplotlib" in m for m in said), said
    assert plot.exists() == (epochs_after == [1, 2])
