"""The ``distconv`` command, run as a real subprocess (``python -m distconv``)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import load_checkpoint
from distconv.data import write_idx
from distconv.notes import add_note
from distconv.run_dir import RunDirectory
from tests.child_env import child_path
from tests.signals import sigint_as_in_a_terminal

REPO = Path(__file__).resolve().parents[1]


def distconv(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 120):
    """Run ``python -m distconv ARGS``; returns the CompletedProcess."""
    full_env = {**os.environ, "PYTHONPATH": child_path(), **(env or {})}
    full_env.pop("DISTCONV_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "distconv", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


def _latest(out: Path):
    """The newest complete checkpoint of the run in ``out``, loaded."""
    return load_checkpoint(RunDirectory(out).latest().part("chief"))


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
    assert _latest(out).epoch == 2


def test_resume_through_the_cli_matches_an_uninterrupted_run(tmp_path):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert distconv("train", *SMALL, "--epochs", "2", "--out", str(whole)).returncode == 0
    assert distconv("train", *SMALL, "--epochs", "1", "--out", str(parts)).returncode == 0
    proc = distconv("train", *SMALL, "--epochs", "2", "--out", str(parts), "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "resumed from" in proc.stderr
    a, b = _latest(whole), _latest(parts)
    assert (a.epoch, a.step) == (b.epoch, b.step) == (2, 24)
    for name, value in a.params.items():
        np.testing.assert_array_equal(b.params[name], value, err_msg=name)
    assert [r["test_acc"] for r in _records(parts)] == [r["test_acc"] for r in _records(whole)]


def test_json_logs_make_every_line_json_the_result_and_the_error_too(tmp_path):
    """Under --log-format json the closing result on stdout and the error that ends a run on
    stderr were plain text: a collector parsing a pod's merged output as JSON got lines it
    could not parse, the run's result and failure among them."""
    out = tmp_path / "run"
    proc = distconv("train", *SMALL, "--epochs", "1", "--out", str(out), "--log-format", "json")
    assert proc.returncode == 0, proc.stderr
    logged = [json.loads(line) for line in proc.stderr.splitlines()]
    assert any(entry["message"].startswith("epoch 1/1") for entry in logged)
    (result,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert result["message"].startswith("test accuracy") and result["out"] == str(out)
    (record,) = _records(out)
    assert (result["epoch"], result["test_acc"]) == (1, record["test_acc"])
    assert result["test_loss"] == record["test_loss"] and result["rank"] == 0

    proc = distconv(
        "train",
        *SMALL,
        "--epochs",
        "1",
        "--out",
        str(out),
        "--resume",
        "auto",
        "--log-format",
        "json",
    )
    (again,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert again["message"].startswith("nothing left to do") and again["epoch"] == 1

    args = ("--data", "mnist", "--data-dir", str(tmp_path / "nope"), "--log-format", "json")
    proc = distconv("train", *args)
    _assert_one_line_error(proc, "MNIST directory", "does not exist")
    (error,) = [json.loads(line) for line in proc.stderr.splitlines() if "error:" in line]
    assert error["level"] == "error" and error["job_id"] == "local"


def test_json_logs_make_pythons_warnings_json_lines_too(tmp_path):
    """A diverging run's numpy warnings (``RuntimeWarning: overflow encountered in matmul``)
    went to stderr as two raw lines each under --log-format json, just before the JSON error
    line: a collector parsing stderr as JSON refused them."""
    flags = ("--optimizer", "sgd", "--lr", "1e30", "--log-format", "json")
    proc = distconv("train", *SMALL, "--epochs", "1", "--out", str(tmp_path / "run"), *flags)
    _assert_one_line_error(proc, "the loss became NaN or infinite")
    logged = [json.loads(line) for line in proc.stderr.splitlines()]  # every line
    warned = [entry for entry in logged if entry["logger"] == "py.warnings"]
    assert warned and all("RuntimeWarning" in entry["message"] for entry in warned), logged
    assert all(entry["level"] == "warning" and entry["rank"] == 0 for entry in warned)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "flags, words",
    [
        (("--rank", "5", "--world-size", "2"), "rank 5 is out of range for world size 2"),
        (("--stall-seconds", "5"), "--stall-seconds"),
    ],
)
def test_json_logs_make_an_error_found_before_the_log_is_set_up_json_too(flags, words):
    """A flag the runtime or the probes refuse is found before the log has a handler:
    under --log-format json its error stayed plain text."""
    proc = distconv("train", *SMALL, "--epochs", "1", "--log-format", "json", *flags)
    _assert_one_line_error(proc, words)
    (error,) = [json.loads(line) for line in proc.stderr.splitlines() if "error:" in line]
    assert error["level"] == "error" and error["message"].startswith("distconv train: error:")
    assert error["rank"] is None  # not known yet: no rank 0 it may not be


def test_default_out_dir_is_under_runs(tmp_path):
    proc = distconv("train", *SMALL, "--epochs", "1", "--seed", "4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _latest(tmp_path / "runs" / "synthetic-adam-seed4").epoch == 1


def test_missing_mnist_directory_is_one_line(tmp_path):
    proc = distconv("train", "--data", "mnist", "--data-dir", str(tmp_path / "nope"))
    _assert_one_line_error(proc, "MNIST directory", "nope", "does not exist")


@pytest.mark.parametrize(
    "name, value, words",
    [
        ("DISTCONV_AUTOTUNE", "2", "DISTCONV_AUTOTUNE must be 0 or 1, got '2'"),
        ("DISTCONV_NUM_THREADS", "x", "DISTCONV_NUM_THREADS must be an integer >= 1, got 'x'"),
    ],
)
def test_a_malformed_kernel_setting_is_one_line_before_anything_is_written(
    tmp_path, name, value, words
):
    out = tmp_path / "run"
    proc = distconv("train", *SMALL, "--epochs", "1", "--out", str(out), env={name: value})
    _assert_one_line_error(proc, words)
    assert not out.exists()


def test_mnist_without_data_dir(tmp_path):
    _assert_one_line_error(distconv("train", "--data", "mnist"), "--data-dir")


def test_mnist_images_too_small_for_lenet_are_one_line(tmp_path):
    """Valid IDX files of 3x3 images ended in a ValueError traceback from lenet."""
    for name, shape in (("train", (8, 3, 3)), ("t10k", (4, 3, 3))):
        write_idx(tmp_path / f"{name}-images-idx3-ubyte", np.zeros(shape))
        write_idx(tmp_path / f"{name}-labels-idx1-ubyte", np.arange(shape[0]) % 10)
    proc = distconv(
        "train", "--data", "mnist", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")
    )
    _assert_one_line_error(proc, "LeNet: image_shape (1, 3, 3) is too small", "at least 4x4")


def test_corrupt_checkpoint_is_one_line(tmp_path):
    out = tmp_path / "run"
    assert distconv("train", *SMALL, "--epochs", "1", "--out", str(out)).returncode == 0
    part = RunDirectory(out).latest().part("chief")
    part.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    proc = distconv("train", *SMALL, "--epochs", "2", "--out", str(out), "--resume")
    _assert_one_line_error(proc, "chief.safetensors is unreadable")


def test_resume_without_checkpoint_is_one_line(tmp_path):
    (tmp_path / "fresh").mkdir()
    proc = distconv("train", *SMALL, "--out", str(tmp_path / "fresh"), "--resume")
    _assert_one_line_error(proc, "no complete checkpoint")


def test_an_out_that_cannot_be_made_is_named_as_the_folder_not_its_lock(tmp_path):
    """An --out whose folder cannot be made (a name past NAME_MAX here; a read-only disk above
    it) was a bare '[Errno 36] File name too long: ...' from a look at it, or 'cannot take
    <out>/run.lock: read-only file system', a lock never tried."""
    out = tmp_path / ("x" * 300) / "run"
    proc = distconv("train", *SMALL, "--out", str(out))
    _assert_one_line_error(proc, f"output directory {out} cannot be made: file name too long")


def test_resume_from_an_out_that_does_not_exist_says_so_and_makes_nothing(tmp_path):
    """``--resume`` with a mistyped ``--out`` made the directories and a run.lock, then said
    "no complete checkpoint in <out>/checkpoints", as if a run had been there."""
    out = tmp_path / "typo" / "run"
    proc = distconv("train", *SMALL, "--out", str(out), "--resume")
    _assert_one_line_error(proc, f"no complete checkpoint in {out / 'checkpoints'}: {out} does not")
    assert not (tmp_path / "typo").exists()


def test_resume_auto_trains_on_an_empty_directory_and_finds_nothing_left_after(tmp_path):
    out = tmp_path / "run"
    proc = distconv("train", *SMALL, "--epochs", "1", "--out", str(out), "--resume", "auto")
    assert proc.returncode == 0 and "test accuracy" in proc.stdout, proc.stderr
    proc = distconv("train", *SMALL, "--epochs", "1", "--out", str(out), "--resume", "auto")
    assert proc.returncode == 0, proc.stderr
    assert "nothing left to do" in proc.stdout and len(_records(out)) == 1


def test_running_the_same_command_twice_keeps_the_first_run(tmp_path):
    out = tmp_path / "keep"
    assert distconv("train", *SMALL, "--epochs", "2", "--out", str(out)).returncode == 0
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "run.lock"}
    proc = distconv("train", *SMALL, "--epochs", "1", "--out", str(out))
    _assert_one_line_error(proc, "already holds a run", "--resume", "--overwrite")
    assert {p: p.read_bytes() for p in files} == files
    proc = distconv("train", *SMALL, "--epochs", "1", "--out", str(out), "--overwrite")
    assert proc.returncode == 0 and [r["epoch"] for r in _records(out)] == [1]


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_signal_mid_epoch_then_resume_auto_ends_with_the_weights_of_one_run(
    tmp_path, signum, status
):
    """SIGTERM, or Ctrl-C (SIGINT) once: a checkpoint where it stopped, then a resume."""
    args = (*SMALL, "--batch-size", "8", "--epochs", "2", "--checkpoint-every", "1000")
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert distconv("train", *args, "--out", str(whole)).returncode == 0
    env = {**os.environ, "PYTHONPATH": child_path(), "DISTCONV_PROGRESS": "0"}
    child = subprocess.Popen(
        [sys.executable, "-m", "distconv", "train", *args, "--out", str(parts)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,
    )
    try:  # wait for the first epoch's log line, then stop it in the second epoch
        for line in child.stderr:
            if "epoch 1/2" in line:
                child.send_signal(signum)
                break
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == status, err
    assert f"stopped by {signal.Signals(signum).name} after step" in err
    assert ("Ctrl-C: stopping at the next step" in err) == (signum == signal.SIGINT)
    stopped = _latest(parts)
    assert stopped.epoch == 1 and 48 < stopped.step < 96, stopped.step  # inside epoch 2
    proc = distconv("train", *args, "--out", str(parts), "--resume", "auto")
    assert proc.returncode == 0, proc.stderr
    a, b = _latest(whole), _latest(parts)
    assert (a.epoch, a.step) == (b.epoch, b.step) == (2, 96)
    for name, value in a.params.items():
        np.testing.assert_array_equal(b.params[name], value, err_msg=name)
    for name, value in a.optim_state.items():
        for key, buf in value.items():
            np.testing.assert_array_equal(b.optim_state[name][key], buf)


def test_resume_on_another_data_set_names_the_data_set_on_one_line(tmp_path):
    """The digits' ten classes do not fit the synthetic set's four: the refusal named fc2's
    shapes, the symptom; the run's facts name the cause, the data set, and now come first."""
    out = tmp_path / "run"
    assert distconv("train", *SMALL, "--epochs", "1", "--out", str(out)).returncode == 0
    proc = distconv(
        "train", "--data", "digits", "--batch-size", "32", "--out", str(out), "--resume"
    )
    _assert_one_line_error(
        proc,
        "comes from a different run",
        "data: checkpoint 'synthetic', this run 'digits'",
        "parameters do not fit this model either (2 differences",  # found, not listed
    )
    assert "fc2" not in proc.stderr
    args = ("train", "--data", "digits", "--batch-size", "32", "--out", str(out), "--resume")
    env = {**os.environ, "PYTHONPATH": child_path(), "DISTCONV_DEBUG": "1"}
    debug = subprocess.run(  # the list: the refusal's cause, in its traceback
        [sys.executable, "-m", "distconv", *args], capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip
    assert debug.returncode == 1 and "direct cause" in debug.stderr, debug.stderr
    assert "parameter 'fc2.bias': model shape (10,), checkpoint shape (4,)" in debug.stderr


def test_resume_in_another_dtype_says_the_cast_that_loads_the_weights_and_it_trains_on(
    tmp_path,
):
    """The refusal sent the user to restore_checkpoint, which refused the float32 model in
    turn ("model dtype float32, checkpoint dtype float64") without naming the cast that
    converts; it now says it, and following it a new run trains on from those weights."""
    from distconv.checkpoint import CheckpointError, restore_checkpoint
    from distconv.data import load_dataset
    from distconv.init import set_seed
    from distconv.models import lenet
    from distconv.optim import create_optimizer
    from distconv.sync.local import LocalSync
    from distconv.trainer import Trainer

    out = tmp_path / "run"
    first = distconv("train", *SMALL, "--epochs", "1", "--dtype", "float64", "--out", str(out))
    assert first.returncode == 0, first.stderr
    again = ("--epochs", "2", "--dtype", "float32", "--out", str(out), "--resume")
    proc = distconv("train", *SMALL, *again)
    _assert_one_line_error(
        proc,
        "dtype: checkpoint 'float64', this run 'float32'",
        "Its parameters differ from this model's in dtype alone (float64, this model float32): "
        "to train this model on from them, cast this model's parameters to float64 first "
        "(p.cast('float64') for each), load them (distconv.checkpoint.restore_checkpoint), "
        "then train with Trainer(dtype='float32'), which casts them back, in another output "
        "directory (out_dir, --out).",
    )
    assert "they load only into a model built as the checkpoint's" not in proc.stderr
    saved = _latest(out).params
    train, test = load_dataset("synthetic", None, 0)  # as distconv train loads it
    set_seed(0)
    net = lenet(train.image_shape, train.num_classes)
    chief = RunDirectory(out).latest().part("chief")
    with pytest.raises(CheckpointError) as uncast:  # the load advised names the cast too
        restore_checkpoint(chief, net.parameters())
    assert "model dtype float32, checkpoint dtype float64" in str(uncast.value)
    assert "cast this model's parameters to float64 first (p.cast('float64') for each)" in str(
        uncast.value
    )
    for p in net.parameters():
        p.cast("float64")
    restore_checkpoint(chief, net.parameters())
    sync = LocalSync(create_optimizer("sgd", lr=0.01))
    trainer = Trainer(net, sync, 32, out_dir=tmp_path / "new", progress=False, dtype="float32")
    for p in net.parameters():  # the checkpoint's weights, in float32
        np.testing.assert_array_equal(p.value, saved[p.name].astype(np.float32), err_msg=p.name)
    (record,) = trainer.fit(train, test, epochs=1)
    assert np.isfinite(record["train_loss"]) and record["step"] == 12, record
    moved = [
        not np.array_equal(p.value, saved[p.name].astype(np.float32)) for p in net.parameters()
    ]
    assert all(moved) and all(p.value.dtype == np.float32 for p in net.parameters())


def test_bad_device_from_the_environment(tmp_path):
    proc = distconv("train", *SMALL, "--out", str(tmp_path), env={"DISTCONV_DEVICE": "tpu"})
    # named by its variable: no flag of the command line said 'tpu'
    _assert_one_line_error(proc, "DISTCONV_DEVICE must be one of", "'tpu'")


def test_gpu_without_cupy_is_one_line(tmp_path):
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed here; the missing-cupy message cannot be provoked")
    except ImportError:
        pass
    proc = distconv("train", *SMALL, "--device", "gpu", "--out", str(tmp_path))
    _assert_one_line_error(proc, "needs cupy")


def test_usage_errors_exit_2(tmp_path):
    proc = distconv("train", "--epochs", "0")
    assert proc.returncode == 2 and "must be >= 1" in proc.stderr
    out = ["--out", str(tmp_path / "never"), "--epochs", "1"]  # a regression must not train long
    bad_values = (["--lr", "inf"], ["--lr", "nan"], ["--lr-decay", "2"], ["--lr", "abc"])
    for bad in (*bad_values, ["--epochs", "x"]):
        proc = distconv("train", *out, *bad)
        assert proc.returncode == 2 and "must" in proc.stderr, (bad, proc.stderr)
        assert "invalid parse value" not in proc.stderr
    proc = distconv("train", "--out", "", "--epochs", "1")
    assert proc.returncode == 2 and "must not be empty" in proc.stderr
    assert not (tmp_path / "never").exists()
    assert distconv().returncode == 2  # no subcommand
    version = distconv("--version")
    assert version.returncode == 0 and version.stdout.startswith("distconv ")


def test_a_file_as_out_is_one_line(tmp_path):
    (tmp_path / "f").write_text("x")
    proc = distconv("train", *SMALL, "--out", str(tmp_path / "f"))
    _assert_one_line_error(proc, "exists and is not a directory")


@pytest.mark.timeout(150)
@pytest.mark.parametrize("above", ["file", "link"])
def test_a_file_or_a_link_to_nowhere_above_out_is_named(tmp_path, above):
    """``--out runs/r1`` with ``runs`` a file, or a link to an unmounted scratch, failed as
    'cannot take runs/r1/run.lock: file exists', naming neither."""
    runs = tmp_path / "runs"
    if above == "file":
        runs.write_text("x")
    else:
        runs.symlink_to(tmp_path / "scratch")
    proc = distconv("train", *SMALL, "--out", str(runs / "r1"))
    said = "is a file, not a folder" if above == "file" else f"to {tmp_path / 'scratch'}, not"
    _assert_one_line_error(proc, f"output directory {runs / 'r1'} cannot be made: {runs} ", said)
    assert not (tmp_path / "scratch").exists()


def test_local_sync_with_several_workers_is_one_line(tmp_path):
    proc = distconv("train", *SMALL, "--out", str(tmp_path), env={"RANK": "1", "WORLD_SIZE": "2"})
    _assert_one_line_error(proc, "rank 1 of 2", "--sync pserver or mpi")


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 15 s on an idle 2-core machine; far longer on a busy one
def test_defaults_reach_98_percent_on_digits(tmp_path):
    proc = distconv("train", "--out", str(tmp_path / "run"), timeout=850)
    assert proc.returncode == 0, proc.stderr
    last = _records(tmp_path / "run")[-1]
    assert last["epoch"] == 20
    assert last["test_acc"] >= 0.98, last


def _served_port(child: subprocess.Popen, log: Path, timeout: float = 60) -> int:
    """The port ``child`` (``--health-port 0``) says it serves probes and metrics on, from its
    stderr in ``log``."""
    deadline = time.monotonic() + timeout
    while not (said := re.search(r"probes and metrics on port (\d+)", log.read_text())):
        assert child.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the worker never said its port"
        time.sleep(0.05)
    return int(said.group(1))


def test_a_worker_serves_probes_and_metrics_while_it_trains(tmp_path):
    import urllib.error
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    env = {**os.environ, "PYTHONPATH": child_path()}
    log = tmp_path / "stderr"
    err = log.open("w")  # the child's: a pipe nobody read would stall it
    args = [*SMALL, "--batch-size", "4", "--epochs", "3", "--out", str(tmp_path / "r")]
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distconv",
            "train",
            *args,
            "--health-port",
            "0",  # the kernel's choice, read from the log: a port chosen here and bound
            # later by the child could be taken meanwhile (the other xdist worker's tests)
            "--stall-seconds",
            "900",
        ],  # a checkpoint may take longer than the 300 s default
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    err.close()

    def get(path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, ""
        except OSError:
            return None, ""

    try:
        port = _served_port(child, log)  # in the try: a child that never says it is killed
        deadline = time.monotonic() + 60
        while get("/readyz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert get("/readyz")[0] == 200 and get("/healthz")[0] == 200
        assert get("/healthz")[1].endswith("(limit 900 s)\n"), get("/healthz")
        while time.monotonic() < deadline:  # wait until a few steps are counted
            families = {f.name: f for f in text_string_to_metric_families(get("/metrics")[1])}
            samples = families["distconv_samples"].samples
            if samples and samples[0].value >= 16:
                break
            time.sleep(0.05)
        assert samples[0].value >= 16 and samples[0].labels["rank"] == "0"
    finally:
        child.kill()
        child.wait()


def test_a_damaged_manifest_stops_resume_auto_instead_of_starting_over(tmp_path):
    out = tmp_path / "run"
    assert distconv("train", *SMALL, "--epochs", "1", "--out", str(out)).returncode == 0
    (manifest,) = (out / "checkpoints").glob("step-*.json")
    manifest.write_text('{"step": 12, "par')
    proc = distconv("train", *SMALL, "--epochs", "2", "--out", str(out), "--resume", "auto")
    _assert_one_line_error(proc, "no usable checkpoint", "is damaged")
    assert len(_records(out)) == 1  # the first run's metrics are still there


def test_a_damaged_metrics_log_is_one_line(tmp_path):
    out = tmp_path / "run"
    assert distconv("train", *SMALL, "--epochs", "1", "--out", str(out)).returncode == 0
    (out / "metrics.jsonl").write_text("5\n")
    proc = distconv("train", *SMALL, "--epochs", "2", "--out", str(out), "--resume")
    _assert_one_line_error(proc, "metrics.jsonl", "line 1")


class _Writes:
    """A stderr that records each write (Python's own writes through: each is a syscall)."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.timeout(60)
def test_the_last_line_is_one_write_so_ranks_lines_never_run_together(monkeypatch, tmp_path):
    """Under mpiexec every rank says its stop or its error on the one stderr: written as text
    and newline apart, two ranks' lines ran into one (``...after step 272distconv train: ...``)."""
    from distconv import cli
    from distconv.messages import say
    from distconv.sync.mpi import leaving

    monkeypatch.setattr(leaving, "BRIEF_ERRORS", leaving.BRIEF_ERRORS)  # run_train sets it
    stderr = _Writes()
    monkeypatch.setattr(sys, "stderr", stderr)
    say("distconv train: stopped by SIGTERM after step 272")
    assert stderr.writes == ["distconv train: stopped by SIGTERM after step 272\n"]
    stderr.writes.clear()
    missing = tmp_path / "nowhere"
    assert cli.main(["train", "--data", "mnist", "--data-dir", str(missing)]) == 1
    said = [w for w in stderr.writes if "error:" in w]
    assert said == [
        f"distconv train: error: DataError: MNIST directory {missing} does not exist\n"
    ], said


def test_a_reader_that_closed_stdout_does_not_fail_a_finished_run(tmp_path):
    """``distconv train ... | head -c 0`` exited 1 with 'error: [Errno 32] Broken pipe' after a
    run that had written all its files; the run's own status is kept."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    env.pop("DISTCONV_DEBUG", None)
    out = tmp_path / "r"
    for resume in ((), ("--resume", "auto")):  # the final line, then "nothing left to do"
        reader = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE)
        reader.wait(timeout=60)  # gone before the run writes its line: no one reads the pipe
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "distconv", "train", *SMALL, "--epochs", "1"]
                + ["--out", str(out), *resume],
                stdout=reader.stdin,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                timeout=120,
            )
        finally:
            reader.stdin.close()
        assert proc.returncode == 0, proc.stderr
        assert "Broken pipe" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert len(_records(out)) == 1


@pytest.mark.parametrize(
    "value, traceback", [("0", False), ("", False), ("false", False), ("Off", False), ("1", True)]
)
def test_distconv_debug_0_is_off(tmp_path, value, traceback):
    """``DISTCONV_DEBUG=0`` turned the tracebacks on, as any value did; 0 and empty are off,
    as ``DISTCONV_PROGRESS=0`` is, for the distconv and distconv-launch commands alike."""
    missing = str(tmp_path / "nowhere")
    env = {**os.environ, "PYTHONPATH": child_path(), "DISTCONV_DEBUG": value}
    for argv in (
        ["-m", "distconv", "train", "--data", "mnist", "--data-dir", missing],
        ["-m", "launcher", "local", "--workers", "1", "--servers", "0", "--run-dir", missing,
         "--", f"{missing}/script.py"],
    ):  # fmt: skip
        done = subprocess.run(
            [sys.executable, *argv], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode != 0
        assert ("Traceback (most recent call last)" in done.stderr) is traceback, done.stderr


def test_a_blank_keys_flag_stops_before_the_environment_s_keys_stand_in(tmp_path):
    """``--keys "$KEYS"`` with the variable unset: the worker took DISTCONV_KEYS's directory
    instead, without a word, and failed naming a key file there."""
    env_keys = tmp_path / "keys-from-the-environment"
    proc = distconv(
        *("train", "--sync", "pserver", "--pservers", "127.0.0.1:9", "--keys", ""),
        *("--out", str(tmp_path / "run")),
        env={"DISTCONV_KEYS": str(env_keys)},
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "argument --keys: must not be empty" in proc.stderr
    assert str(env_keys) not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_blank_job_id_is_quoted_as_given(tmp_path):
    """``distconv train --job-id '   '`` said ``got ''``, not what was typed."""
    proc = distconv("train", "--job-id", "   ", "--out", str(tmp_path / "run"), timeout=60)
    assert proc.returncode == 1, proc.stderr
    said = "--job-id: job id must be a non-empty word, got '   ' (only whitespace, 3 characters)"
    _assert_one_line_error(proc, said)
    assert not (tmp_path / "run").exists()


def test_spaces_inside_a_quoted_value_are_printed_as_given(tmp_path):
    """The error line made each run of whitespace one space, in the quoted value too:
    ``DISTCONV_JOB_ID='a  b'`` was said as ``got 'a b'``, an id nobody typed."""
    out = tmp_path / "run"
    proc = distconv("train", "--out", str(out), env={"DISTCONV_JOB_ID": "a  b"}, timeout=60)
    _assert_one_line_error(proc, "DISTCONV_JOB_ID: job id must be a non-empty word, got 'a  b'")
    assert not out.exists()


def test_a_blank_keys_variable_is_no_key_directory(tmp_path):
    """``DISTCONV_KEYS='  '`` read as the directory ``'  '``: the worker failed naming the key
    file ``  /worker-0.key_secret``, not the keys it lacks."""
    proc = distconv(
        *("train", "--sync", "pserver", "--pservers", "127.0.0.1:9"),
        *("--out", str(tmp_path / "run")),
        env={"DISTCONV_KEYS": "  "},
        timeout=60,
    )
    _assert_one_line_error(proc, "--sync pserver needs the job's CURVE keys: --keys DIR")
    assert "key_secret" not in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("second", [False, True], ids=["one", "second"])
def test_distconv_train_says_a_ctrl_cs_notes_after_interrupted(monkeypatch, capsys, second):
    """``distconv train`` ended a Ctrl-C with ``interrupted`` alone: where it came during
    ``MPISync.fail_setup``, its note, naming the error the fit had failed with and whether the
    other ranks were told, was said nowhere. Each line of its notes follows now, and so where a
    second Ctrl-C came as that one propagated (its context). (The handler is replaced to raise
    it: such a Ctrl-C cannot be timed in a real run from here; the MPI one's note is made for
    real in ``tests/mpi/test_fit_fails_before_setup.py``.)"""
    note = "this rank could not set up (ValueError: x); the others were told"

    def handler(args):
        interrupt = KeyboardInterrupt()
        add_note(interrupt, note)
        add_note(interrupt, "one\ntwo")
        try:
            raise interrupt
        finally:
            if second:
                raise KeyboardInterrupt  # its context: the noted one

    from distconv import cli

    monkeypatch.setattr(cli, "run_train", handler)
    assert cli._main(["train", "--data", "synthetic"]) == 130
    lead = "distconv train: "  # the notes' lines from Python 3.11 on; before, none to say
    lines = [
        f"{lead}interrupted",
        *(f"{lead}{line}" for line in [note, "one", "two"]),
    ]
    said = capsys.readouterr().err.splitlines()[-len(lines) :]
    assert said == lines, said
