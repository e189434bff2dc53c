"""The ``distconv`` command, run as a real subprocess (``python -m distconv``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[1]


def distconv(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 120):
    """Run ``python -m distconv ARGS``; returns the CompletedProcess."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    full_env.pop("DISTCONV_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "distconv", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def _assert_one_line_error(proc, *fragments: str) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [x for x in proc.stderr.splitlines() if "error:" in x]
    assert len(lines) == 1, proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


SMALL = ("--data", "synthetic", "--batch-size", "32", "--no-progress")


def test_train_writes_metrics_plot_and_checkpoint(tmp_path):
    out = tmp_path / "run"
    proc = distconv("train", *SMALL, "--epochs", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "test accuracy" in proc.stdout and str(out) in proc.stdout
    assert "epoch 2/2" in proc.stderr  # the per-epoch log
    records = _records(out)
    assert [r["epoch"] for r in records] == [1, 2]
    assert records[1]["step"] == 2 * 12  # 384 training examples / 32
    assert 0.0 <= records[1]["test_acc"] <= 1.0 and records[1]["train_loss"] > 0
    assert (out / "metrics.png").stat().st_size > 5000
    assert load_checkpoint(out / "checkpoint.safetensors").epoch == 2


def test_resume_through_the_cli_matches_an_uninterrupted_run(tmp_path):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert distconv("train", *SMALL, "--epochs", "2", "--out", str(whole)).returncode == 0
    assert distconv("train", *SMALL, "--epochs", "1", "--out", str(parts)).returncode == 0
    proc = distconv("train", *SMALL, "--epochs", "2", "--out", str(parts), "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "resumed from" in proc.stderr
    a = load_checkpoint(whole / "checkpoint.safetensors")
    b = load_checkpoint(parts / "checkpoint.safetensors")
    assert (a.epoch, a.step) == (b.epoch, b.step) == (2, 24)
    for name, value in a.params.items():
        np.testing.assert_array_equal(b.params[name], value, err_msg=name)
    assert [r["test_acc"] for r in _records(parts)] == [r["test_acc"] for r in _records(whole)]


def test_default_out_dir_is_under_runs(tmp_path):
    proc = distconv("train", *SMALL, "--epochs", "1", "--seed", "4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runs" / "synthetic-adam-seed4" / "checkpoint.safetensors").is_file()


def test_missing_mnist_directory_is_one_line(tmp_path):
    proc = distconv("train", "--data", "mnist", "--data-dir", str(tmp_path / "nope"))
    _assert_one_line_error(proc, "MNIST directory", "nope", "does not exist")


def test_mnist_without_data_dir(tmp_path):
    _assert_one_line_error(distconv("train", "--data", "mnist"), "--data-dir")


def test_corrupt_checkpoint_is_one_line(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoint.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    proc = distconv("train", *SMALL, "--out", str(out), "--resume")
    _assert_one_line_error(proc, "checkpoint.safetensors is unreadable")


def test_resume_without_checkpoint_is_one_line(tmp_path):
    proc = distconv("train", *SMALL, "--out", str(tmp_path / "fresh"), "--resume")
    _assert_one_line_error(proc, "checkpoint.safetensors does not exist")


def test_resume_into_another_model_lists_the_mismatch_on_one_line(tmp_path):
    out = tmp_path / "run"
    assert distconv("train", *SMALL, "--epochs", "1", "--out", str(out)).returncode == 0
    proc = distconv(
        "train", "--data", "digits", "--batch-size", "32", "--out", str(out), "--resume"
    )
    _assert_one_line_error(proc, "does not fit the model", "fc2.weight")


def test_bad_device_from_the_environment(tmp_path):
    proc = distconv("train", *SMALL, "--out", str(tmp_path), env={"DISTCONV_DEVICE": "tpu"})
    _assert_one_line_error(proc, "device must be one of", "'tpu'")


def test_gpu_without_cupy_is_one_line(tmp_path):
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed here; the missing-cupy message cannot be provoked")
    except ImportError:
        pass
    proc = distconv("train", *SMALL, "--device", "gpu", "--out", str(tmp_path))
    _assert_one_line_error(proc, "needs cupy")


def test_usage_errors_exit_2():
    proc = distconv("train", "--epochs", "0")
    assert proc.returncode == 2 and "must be >= 1" in proc.stderr
    assert distconv().returncode == 2  # no subcommand
    version = distconv("--version")
    assert version.returncode == 0 and version.stdout.startswith("distconv ")


def test_nan_data_is_one_line(monkeypatch, capsys, tmp_path):
    """In-process: no real data file can hold NaN, so feed a NaN array through the loader."""
    import distconv.trainer
    from distconv.cli import main
    from distconv.data import Dataset

    def nan_data(name, data_dir=None, seed=0):
        x = np.zeros((8, 1, 8, 8), np.float32)
        x[2, 0, 3, 3] = np.nan
        return Dataset(x, np.zeros(8, np.int64), 10, "mydata"), None

    monkeypatch.setattr(distconv.trainer, "load_dataset", nan_data)
    assert main(["-q", "train", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "distconv train: error: mydata: images hold 1 NaN or infinite values"


@pytest.mark.slow
def test_defaults_reach_98_percent_on_digits_within_a_minute(tmp_path):
    start = time.perf_counter()
    proc = distconv("train", "--out", str(tmp_path / "run"), timeout=300)
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    last = _records(tmp_path / "run")[-1]
    assert last["epoch"] == 20
    assert last["test_acc"] >= 0.98, last
    assert seconds < 60, f"took {seconds:.1f}s"
