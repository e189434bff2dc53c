"""The metrics log and the plot on a full disk, for real (a small tmpfs where this
user may mount one; RLIMIT_FSIZE in a subprocess everywhere else, where write gives EFBIG).

The log was a bare ``OSError: [Errno 28] No space left on device: '.../metrics.jsonl'``, the
only failure of a run that is not worded as a checkpoint's is. The plot, drawn after the last
checkpoint and metrics line are on disk, failed a finished run (and its restart, for ever)."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.data import split, synthetic
from distconv.init import set_seed
from distconv.metrics import MetricsWriter
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.run_dir import RunDirectory
from distconv.sync import create_sync
from distconv.trainer import Trainer
from tests.child_env import child_path
from tests.small_disk import small_tmpfs

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs, unmounted after the test; skipped where mount is not permitted."""
    with small_tmpfs(tmp_path, "256k") as mount:
        yield mount


def _fill(disk: Path, leave: int = 0) -> None:
    """Fill ``disk`` until ``leave`` bytes are free (0: until a write fails with ENOSPC)."""
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as f:
        try:
            f.write(b"x" * (free - leave))
        except OSError as exc:
            assert exc.errno == errno.ENOSPC and not leave


def _fit(out: Path, epochs: int):
    train, test = split(synthetic(n=64, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(2, 2), hidden=4)
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.01))
    trainer = Trainer(net, sync, 16, out_dir=out, progress=False)
    return trainer.fit(train, test, epochs=epochs, resume="auto")


def test_a_full_disk_at_a_resumes_metrics_log_stops_it_naming_the_file_and_cause(small_disk):
    out = small_disk / "run"
    _fit(out, 1)
    _fill(small_disk)
    with pytest.raises(OSError) as failed:  # an OSError still: callers catching one see it
        _fit(out, 2)
    said = str(failed.value)
    assert said.startswith(f"cannot write metrics log {out / 'metrics.jsonl'}: "), said
    assert "no space left on device" in said and "[Errno" not in said, said
    assert failed.value.errno == errno.ENOSPC
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1  # as it was


def test_a_plot_that_finds_the_disk_full_warns_and_the_finished_run_stands(small_disk, caplog):
    """The plot is drawn from metrics.jsonl once every line and checkpoint is on disk: failing
    the run for it told a finished run as failed, and its restart failed again, for ever."""
    out = small_disk / "run"
    _fit(out, 1)
    _fill(small_disk, leave=24 << 10)  # room for a checkpoint, not for a plot (~37 KiB)
    with caplog.at_level(logging.WARNING, logger="distconv.metrics"):
        records = _fit(out, 2)
    assert [r["epoch"] for r in records] == [2]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    assert RunDirectory(out).latest().step == 2 * 3  # 48 examples in batches of 16
    (warning,) = [r.getMessage() for r in caplog.records if "metrics.png" in r.getMessage()]
    assert f"cannot write the plot {out / 'metrics.png'}: no space left on device" in warning
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


#: a metrics log past RLIMIT_FSIZE: its trim at a resume, then an epoch's line
_LOG_PAST_THE_LIMIT = """
import resource, signal, sys
from distconv.metrics import MetricsWriter
path = sys.argv[1]
w = MetricsWriter(path)
for epoch in range(1, 4):
    w.write({"epoch": epoch, "note": "x" * 400})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.RLIM_INFINITY))
for doing in (lambda: MetricsWriter(path, keep_through_epoch=3), lambda: w.write(w.records[0])):
    try:
        doing()
    except OSError as exc:
        print(exc.errno, exc)
"""


def test_a_metrics_log_past_the_file_size_limit_names_the_file_and_cause(tmp_path):
    path = tmp_path / "metrics.jsonl"
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, "-c", _LOG_PAST_THE_LIMIT, str(path)],
        env=env, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = f"{errno.EFBIG} cannot write metrics log {path}: file too large"
    assert done.stdout.splitlines() == [said, said], done.stdout


def test_a_metrics_log_that_can_be_written_is_no_error(tmp_path):
    w = MetricsWriter(tmp_path / "metrics.jsonl")
    w.write({"epoch": 1})
    assert MetricsWriter(tmp_path / "metrics.jsonl", keep_through_epoch=1).records == [{"epoch": 1}]
