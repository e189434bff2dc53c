"""Progress bar, timers, the JSON-lines log and the plot."""

from __future__ import annotations

import io
import json
import time

import pytest

from distconv.metrics import MetricsWriter, ProgressBar, Timer, plot_metrics, read_metrics


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_draws_on_a_tty_only(monkeypatch):
    monkeypatch.delenv("DISTCONV_PROGRESS", raising=False)
    tty, pipe = _Tty(), io.StringIO()
    for stream in (tty, pipe):
        with ProgressBar(4, "epoch 1", stream=stream, min_interval=0) as bar:
            for _ in range(4):
                bar.update(loss=0.123456)
    assert pipe.getvalue() == ""
    last = tty.getvalue().split("\r")[-1]
    assert last.startswith("epoch 1 [" + "#" * 30 + "] 4/4 ")
    assert last.endswith("it/s loss=0.1235\n")


def test_bar_env_override_and_throttle(monkeypatch):
    monkeypatch.setenv("DISTCONV_PROGRESS", "1")
    out = io.StringIO()
    bar = ProgressBar(100, stream=out, min_interval=60)
    for _ in range(100):
        bar.update()
    assert out.getvalue().count("\r") == 2  # the first step and the last, nothing between
    monkeypatch.setenv("DISTCONV_PROGRESS", "0")
    assert not ProgressBar(1, stream=_Tty()).enabled


def test_bar_render_half_way():
    bar = ProgressBar(10, "x", enabled=False)
    bar.count = 5
    assert bar.render(elapsed=2.0) == "x [" + "#" * 15 + "." * 15 + "] 5/10 2.5 it/s"


def test_timer_sums_blocks():
    t = Timer()
    for _ in range(2):
        with t:
            time.sleep(0.02)
    assert t.count == 2
    assert 0.04 <= t.total < 0.5
    assert t.mean == pytest.approx(t.total / 2)


def test_metrics_writer_appends_lines_and_trims_on_resume(tmp_path):
    path = tmp_path / "metrics.jsonl"
    w = MetricsWriter(path)
    for epoch in (1, 2, 3):
        w.write({"epoch": epoch, "train_loss": 1.0 / epoch})
    lines = path.read_text().splitlines()
    assert [json.loads(x)["epoch"] for x in lines] == [1, 2, 3]

    # resuming from the epoch-2 checkpoint drops epoch 3, which will be redone
    w2 = MetricsWriter(path, keep_through_epoch=2)
    assert [r["epoch"] for r in w2.records] == [1, 2]
    w2.write({"epoch": 3, "train_loss": 0.3})
    assert [r["train_loss"] for r in read_metrics(path)] == [1.0, 0.5, 0.3]

    MetricsWriter(path)  # a fresh run starts the file afresh
    assert read_metrics(path) == []


def test_plot_writes_a_png(tmp_path):
    records = [
        {"epoch": e, "train_loss": 1 / e, "train_acc": 1 - 1 / (e + 1), "test_acc": 0.5}
        for e in range(1, 5)
    ]
    path = tmp_path / "metrics.png"
    plot_metrics(records, path, title="digits")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5000
