"""``distconv train``'s last line names the plot only where it was written: a run whose final
plot could not be written (a full disk: a warning, the run stands) ended with "wrote
checkpoints, metrics.jsonl and metrics.png", right after the warning that said it was not
written. Real subprocesses; the plot fails for real (a full tmpfs where this user may mount
one; a directory in the plot's place everywhere)."""

from __future__ import annotations

import shutil

import pytest

from tests.small_disk import small_tmpfs
from tests.test_cli import SMALL, distconv

pytestmark = pytest.mark.timeout(300)


def _last_line(proc) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_the_last_line_names_the_plot_where_it_was_written(tmp_path):
    out = tmp_path / "run"
    line = _last_line(distconv("train", *SMALL, "--epochs", "1", "--out", str(out)))
    assert line.endswith(f"wrote checkpoints, metrics.jsonl and metrics.png in {out}"), line


def test_a_plot_that_could_not_be_written_is_not_said_written(tmp_path):
    out = tmp_path / "run"
    assert distconv("train", *SMALL, "--epochs", "1", "--out", str(out)).returncode == 0
    (out / "metrics.png").unlink()
    (out / "metrics.png").mkdir()  # the plot's rename over it fails: EISDIR
    (out / "metrics.png" / "keep").write_text("x")
    proc = distconv("train", *SMALL, "--epochs", "2", "--resume", "auto", "--out", str(out))
    assert f"cannot write the plot {out / 'metrics.png'}" in proc.stderr, proc.stderr
    assert _last_line(proc).endswith(f"wrote checkpoints and metrics.jsonl in {out}"), proc.stdout


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs, unmounted after the test; skipped where mount is not permitted."""
    with small_tmpfs(tmp_path, "4m") as mount:
        yield mount


def test_a_plot_on_a_full_disk_is_not_said_written(small_disk):
    out = small_disk / "run"
    assert distconv("train", *SMALL, "--epochs", "1", "--out", str(out)).returncode == 0
    (part,) = out.glob("checkpoints/step-*/chief.safetensors")
    room = -(-part.stat().st_size // 4096) * 4096 + (16 << 10)  # the next checkpoint, no plot
    with open(small_disk / "filler", "wb") as f:
        f.write(b"x" * (shutil.disk_usage(small_disk).free - room))
    proc = distconv("train", *SMALL, "--epochs", "2", "--resume", "auto", "--out", str(out))
    said = f"cannot write the plot {out / 'metrics.png'}: no space left on device"
    assert said in proc.stderr, proc.stderr
    assert _last_line(proc).endswith(f"wrote checkpoints and metrics.jsonl in {out}"), proc.stdout
