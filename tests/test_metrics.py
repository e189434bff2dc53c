"""Progress bar, the JSON-lines log (damaged files, atomic rewrites) and the plot."""

from __future__ import annotations

import errno
import io
import json
import os
from pathlib import Path

import pytest

import distconv.files
from distconv.metrics import MetricsError, MetricsWriter, ProgressBar, plot_metrics, read_metrics
from tests.child_env import child_path


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


# -- damaged logs --------------------------------------------------------------------------------
def _log(path, text: str):
    path.write_text(text)
    return path


def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path, caplog):
    path = _log(tmp_path / "metrics.jsonl", '{"epoch": 1}\n{"epoch": 2}\n{"epoch": 3, "tr')
    with caplog.at_level("WARNING", logger="distconv.metrics"):
        w = MetricsWriter(path, keep_through_epoch=5)
    assert "metrics.jsonl: dropping a torn last line" in caplog.text
    assert [r["epoch"] for r in w.records] == [1, 2]
    w.write({"epoch": 3})
    assert [r["epoch"] for r in read_metrics(path)] == [1, 2, 3]


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"epoch": 1}\n{"epo\n{"epoch": 3}\n', r"metrics.jsonl, line 2: not valid JSON"),
        ('{"epoch": 1}\n5\n', r"metrics.jsonl, line 2: expected a JSON object, got int"),
        ("[1, 2]\n", r"metrics.jsonl, line 1: expected a JSON object, got list"),
        ('{"epoch": 1}\n\xff\n', r"metrics.jsonl, line 2: not valid JSON"),
        ('{"epoch": "x"}\n', r"metrics.jsonl: a record's epoch is 'x', not a number"),
    ],
)
def test_other_damage_names_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(MetricsError, match=message):
        MetricsWriter(path, keep_through_epoch=5)
    assert path.read_bytes() == text.encode("latin-1")  # nothing was thrown away


def test_a_crash_while_trimming_keeps_the_history(tmp_path, monkeypatch):
    """The resumed writer replaces the file atomically: a failure mid-rewrite loses nothing."""
    path = tmp_path / "metrics.jsonl"
    w = MetricsWriter(path)
    for epoch in (1, 2, 3):
        w.write({"epoch": epoch, "train_loss": 1.0 / epoch})
    before = path.read_bytes()

    def disk_full(target):  # the disk fills up after the first chunk of the new file
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(distconv.files, "write_hook", disk_full, raising=False)
    with pytest.raises(OSError, match="no space left on device"):
        MetricsWriter(path, keep_through_epoch=2)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["metrics.jsonl"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_full_disk_under_the_metrics_log_names_the_file(tmp_path):
    """/dev/full answers every write with ENOSPC, which names no file: the run ended with
    '[Errno 28] No space left on device' and no word of which file."""
    w = MetricsWriter(tmp_path / "metrics.jsonl")
    w.path = Path("/dev/full")  # the disk fills up between two epochs
    with pytest.raises(OSError) as info:
        w.write({"epoch": 1, "train_loss": 1.0})
    assert info.value.errno == errno.ENOSPC and info.value.filename == "/dev/full"
    assert str(info.value) == "cannot write metrics log /dev/full: no space left on device"
    assert w.records == []  # the line is not counted as written


def test_a_full_disk_under_the_plot_names_the_file(tmp_path, monkeypatch):
    """As the log's (matplotlib writes /dev/full without a word, so the disk fills up here
    as in the other disk-full tests: the write raises ENOSPC, naming no file)."""
    figure = pytest.importorskip("matplotlib.figure")

    def disk_full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(figure.Figure, "savefig", disk_full)
    path = tmp_path / "plot.png"
    with pytest.raises(OSError) as info:
        plot_metrics([{"epoch": 1, "train_loss": 1.0}], path)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)


def test_a_plot_error_of_no_errno_keeps_its_message(tmp_path, monkeypatch):
    """A library's ``OSError("message")`` names no file either, but has no errno and strerror
    to name it with: rebuilt from them it read '[Errno None] None: ...', its cause lost."""
    figure = pytest.importorskip("matplotlib.figure")

    def refused(self, *args, **kwargs):
        raise OSError("cannot write mode RGBA as JPEG")

    monkeypatch.setattr(figure.Figure, "savefig", refused)
    with pytest.raises(OSError, match="^cannot write mode RGBA as JPEG$"):
        plot_metrics([{"epoch": 1, "train_loss": 1.0}], tmp_path / "plot.jpg")


#: draws a plot, then another past RLIMIT_FSIZE (a full disk, as a process sees it): a warning
_PLOT_PAST_THE_LIMIT = """
import resource, signal, sys
from distconv.metrics import plot_metrics
path = sys.argv[1]
records = [{"epoch": e, "train_loss": 1.0 / e, "test_acc": 0.5} for e in range(1, 4)]
plot_metrics(records, path)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.RLIM_INFINITY))
print(plot_metrics(records * 2, path, title="more"))
"""


@pytest.mark.timeout(60)
def test_a_plot_that_cannot_be_written_leaves_the_last_one_whole(tmp_path):
    """``savefig`` wrote into ``metrics.png`` itself, emptying it first: a full disk at the end
    of a resumed run left a truncated PNG where the last whole plot was. It is
    a warning now, not an error (a finished run is not failed for its plot)."""
    import subprocess
    import sys

    path = tmp_path / "metrics.png"
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, "-c", _PLOT_PAST_THE_LIMIT, str(path)],
        env=env, capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False\n", done.stdout
    assert f"cannot write the plot {path}: file too large" in done.stderr, done.stderr
    from matplotlib.image import imread

    assert imread(path).shape[:2] == (400, 1000)  # the first plot, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.png"]
