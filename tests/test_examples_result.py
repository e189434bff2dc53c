"""The examples' closing result line on stdout, as ``distconv train`` prints its own:
a reader gone is no failure, and a run with nothing left to train says so."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.child_env import child_env, child_path
from tests.launcher.launch_cli import launch

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(60)


def _example(example: str, *args: str, cwd: Path, **how) -> subprocess.CompletedProcess:
    """Run ``examples/<example>`` alone in ``cwd``; stderr is captured, stdout as ``how`` says."""
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / example), *args],
        env={**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"},
        cwd=cwd,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        **how,
    )


@pytest.mark.parametrize(
    "example, args",
    [
        ("mixed_regression.py", []),
        ("sparse_table.py", ["--examples", "256", "--batch-size", "128"]),
    ],
)
def test_a_closed_stdout_is_no_failure(tmp_path, example, args):
    """``python examples/mixed_regression.py | head -c 0``: the result line met a closed pipe,
    a BrokenPipeError traceback and status 1 after a run that had finished and saved its
    checkpoint; ``distconv train | head -c 0`` exits 0."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the run ends
    try:
        proc = _example(example, "--epochs", "1", "--out", "run", *args, cwd=tmp_path, stdout=write)
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count("\n") == 1


def test_a_resume_of_a_finished_run_says_there_is_nothing_left(tmp_path):
    """``--resume`` with ``--epochs`` no further than the run had gone trained nothing and
    printed nothing (status 0), as if the script had not run; ``distconv train`` says
    ``nothing left to do: the run in OUT has finished epoch N``."""
    first = _example("mixed_regression.py", "--epochs", "2", "--out", "run", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    for resume in (["--resume"], ["--resume", "auto"]):
        again = _example(
            "mixed_regression.py", "--epochs", "1", "--out", "run", *resume,
            cwd=tmp_path, stdout=subprocess.PIPE,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert again.stdout == "nothing left to do: the run in run has finished epoch 2\n"


def test_a_script_of_several_workers_without_servers_is_told_how_to_start_them(tmp_path):
    """``distconv-launch local --servers 0`` runs a script's ranks with no transport between
    them (docs/operations.md): each stopped telling the user to ``use --sync pserver or mpi``,
    a flag the script does not take, and which alone would not help: the ranks need servers or
    MPI to start with."""
    script = str(REPO / "examples" / "mixed_regression.py")
    proc = launch("local", "--workers", "2", "--servers", "0", "--", script, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    said = (
        r"mixed_regression.py: error: RuntimeConfigError: this process is rank [01] of 2 "
        r"\(distconv\), but local"
    )
    assert re.search(said, proc.stderr), proc.stderr  # either rank may fail first
    assert "distconv-launch local --servers 1 or more" in proc.stderr
    assert "distconv-launch mpi" in proc.stderr


def test_the_last_epoch_of_a_fit_without_a_test_set_is_its_training_loss(capsys):
    """``fit`` without a test set records no ``test_loss``: the line must not fail on it."""
    from distconv.script_flags import print_last_epoch

    trainer = SimpleNamespace(history=[{"epoch": 3, "train_loss": 0.25}])
    assert print_last_epoch(trainer, "run") == {"epoch": 3, "train_loss": 0.25}
    assert capsys.readouterr().out == "train loss 0.25000 after epoch 3\n"


def test_nothing_left_in_an_out_with_a_line_break_is_one_line(tmp_path):
    """The line broke in two at the path's line break: a reader of stdout by lines read half a
    path each time; it is the shell word the error lines show (README)."""
    out = "a\nb"
    first = _example("mixed_regression.py", "--epochs", "1", "--out", out, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = _example(
        "mixed_regression.py", "--epochs", "1", "--out", out, "--resume",
        cwd=tmp_path, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout == "nothing left to do: the run in $'a\\nb' has finished epoch 1\n"


_JSON_ENDINGS = """
from types import SimpleNamespace
import distconv.distributed as dist
from distconv.script_flags import print_last_epoch
dist.init("sgd", lr=0.1, log_format="json")
at_epoch_end = SimpleNamespace(epoch=2, step_in_epoch=0)
print_last_epoch(SimpleNamespace(history=[], pos=at_epoch_end), "a\\nb")
print_last_epoch(SimpleNamespace(history=[{"epoch": 3, "test_loss": 0.5}]), "run")
print_last_epoch(SimpleNamespace(history=[{"epoch": 3, "train_loss": 0.25}]), None)
"""


def test_the_closing_lines_under_a_json_log_are_json_with_the_out_distconv_train_gives(tmp_path):
    """Under ``init(log_format="json")`` each closing line is one JSON object, whose keys are
    those of ``distconv train``'s: it gave ``out``, a script's line did not."""
    proc = subprocess.run([sys.executable, "-c", _JSON_ENDINGS], capture_output=True, text=True,
                          env=child_env(), cwd=tmp_path, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    nothing, tested, trained = map(json.loads, proc.stdout.splitlines())
    assert nothing["message"] == "nothing left to do: the run in $'a\\nb' has finished epoch 2"
    assert (nothing["epoch"], nothing["out"]) == (2, "a\nb")
    assert (tested["test_loss"], tested["out"]) == (0.5, "run")
    assert trained["train_loss"] == 0.25 and "out" not in trained  # no --out: nothing written
