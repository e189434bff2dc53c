"""The examples' flags (distconv.script_flags): a bad value is one usage line, not a traceback
from deep in the Trainer, and a run in --out is refused in one line."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path

REPO = Path(__file__).resolve().parents[1]


def _run(example: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / example), *args],
        env={**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "example, args, said",
    [
        ("mixed_regression.py", ["--epochs", "-1"], "argument --epochs: must be >= 1, got -1"),
        # distconv train's type, as README says: 0 printed nothing, exited 0 and left --out
        # holding an empty metrics.jsonl
        ("mixed_regression.py", ["--epochs", "0"], "argument --epochs: must be >= 1, got 0"),
        ("sparse_table.py", ["--epochs", "0", "--out", "run"], "argument --epochs: must be >= 1"),
        ("mixed_regression.py", ["--batch-size", "0"], "argument --batch-size: must be >= 1"),
        (
            "mixed_regression.py",
            ["--resume", "bogus"],
            "argument --resume: the only value --resume takes is 'auto', got 'bogus'",
        ),
        ("mixed_regression.py", ["--out", ""], "argument --out: must not be empty"),
        ("sparse_table.py", ["--lr", "0"], "argument --lr: must lie in (0.0, inf), got 0"),
        (
            "sparse_table.py",
            ["--optimizer", "bogus"],
            "argument --optimizer: unknown optimizer 'bogus'; choose one",
        ),
        ("sparse_table.py", ["--examples", "0"], "argument --examples: must be >= 1, got 0"),
    ],
)
def test_a_bad_flag_is_one_usage_line_not_a_traceback(tmp_path, example, args, said):
    """Each was a ValueError traceback from the Trainer, dist.init or the sampler (status 1);
    --out "" trained and wrote the run into the current directory."""
    proc = _run(example, *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{example}: error: {said}" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_run_in_out_is_refused_in_one_line_and_overwrite_replaces_it(tmp_path):
    out = tmp_path / "run"
    first = _run("mixed_regression.py", "--epochs", "1", "--out", str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = _run("mixed_regression.py", "--epochs", "1", "--out", str(out), cwd=tmp_path)
    assert again.returncode == 1
    assert "Traceback" not in again.stderr
    assert again.stderr.startswith(f"mixed_regression.py: error: {out} already holds a run")
    # the refusal names --overwrite: the example takes it
    replaced = _run(
        "mixed_regression.py", "--epochs", "1", "--out", str(out), "--overwrite", cwd=tmp_path
    )
    assert replaced.returncode == 0, replaced.stderr
    assert "after epoch 1" in replaced.stdout


@pytest.mark.parametrize("both", [["--resume", "--overwrite"], ["--overwrite", "--resume=auto"]])
def test_resume_and_overwrite_together_are_refused_and_the_run_kept(tmp_path, both):
    """Given both, the last won without a word: --resume --overwrite deleted the run it was
    asked to continue and trained it again from epoch 1 (distconv train refuses the two)."""
    out = tmp_path / "run"
    first = _run("mixed_regression.py", "--epochs", "1", "--out", str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    kept = (out / "metrics.jsonl").read_bytes()
    proc = _run("mixed_regression.py", "--epochs", "2", "--out", str(out), *both, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "not allowed with argument" in proc.stderr
    assert (out / "metrics.jsonl").read_bytes() == kept


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="needs mpiexec")
def test_a_run_in_out_under_mpi_is_one_line_on_each_rank_without_a_traceback(tmp_path):
    """Under MPI the sync closed in the example's finally aborted the job before the refusal
    reached the script: the abort printed the RunDirError's traceback. Now rank 0 tells rank 1
    (``fail_setup``): each says its line, rank 1 that rank 0 could not set up (not that the
    ranks run different jobs), and neither aborts. No ``-m mpi4py``: its runner aborts the job
    on a rank's exit status 1, which may kill rank 1 before it says its line."""
    out = tmp_path / "run"
    argv = [str(REPO / "examples" / "mixed_regression.py"), "--epochs", "1", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"}
    run = ["mpiexec", "-n", "2", sys.executable, *argv]
    first = subprocess.run(run, env=env, capture_output=True, text=True, timeout=90)
    assert first.returncode == 0, first.stderr
    again = subprocess.run(run, env=env, capture_output=True, text=True, timeout=90)
    assert again.returncode == 1, again.stderr
    lines = again.stderr.splitlines()
    said = f"{out} already holds a run; pass --resume"
    assert any(x.startswith(f"mixed_regression.py: error: {said}") for x in lines), again.stderr
    told = f"mixed_regression.py: error: rank 0 could not set up: RunDirError: {said}"
    assert any(x.startswith(told) for x in lines), again.stderr
    for unsaid in ("Traceback", "run different jobs", "aborting the MPI job", "Abort("):
        assert unsaid not in again.stderr, again.stderr


#: a script that logs JSON and whose output directory is refused
REFUSED_UNDER_JSON = """\
import argparse
import distconv.distributed as dist
from distconv.run_dir import RunDirError
from distconv.script_flags import refusals

parser = argparse.ArgumentParser()
sync = dist.init("sgd", lr=0.01, log_format="json")
with refusals(parser):
    raise RunDirError("runs/x already holds a run")
"""


def test_a_refusal_of_a_script_logging_json_is_one_json_line(tmp_path):
    """Under init(log_format="json") the refusal was a plain-text line among JSON lines, which
    a collector parsing a pod's output as JSON could not read; run_main's own lines are JSON.
    """
    script = tmp_path / "refused.py"
    script.write_text(REFUSED_UNDER_JSON)
    env = {**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 1, proc.stderr
    line = json.loads(proc.stderr.splitlines()[-1])
    assert line["message"] == "refused.py: error: runs/x already holds a run"
    assert line["level"] == "error" and line["rank"] == 0


def test_the_run_flags_read_epochs_as_distconv_train_does():
    """README: the examples' flags use the types distconv train reads its own with."""
    from distconv.script_flags import add_run_flags
    from distconv.train_args import train_parser

    script = argparse.ArgumentParser(exit_on_error=False)
    add_run_flags(script, epochs=30, batch_size=32)
    for value in ("0", "1", "7"):
        ok = _parses(train_parser(), ["--epochs", value])
        assert _parses(script, ["--epochs", value]) is ok, value
    assert not _parses(script, ["--epochs", "0"])


def _parses(parser, argv: list[str]) -> bool:
    try:
        parser.parse_args(argv)
    except (SystemExit, argparse.ArgumentError):
        return False
    return True


@pytest.mark.parametrize(
    "example, said",
    [
        (
            "mixed_regression.py",
            ["epochs in all (30)", "on each worker (32)", "checkpoints and metrics"],
        ),
        (
            "sparse_table.py",
            [
                "epochs in all (3)",
                "on each worker (64)",
                "training examples (8192)",
                "adagrad, adam, momentum, nesterov, rmsprop, sgd (adam)",
                "learning rate (0.01)",
            ],
        ),
    ],
)
def test_help_says_what_each_flag_is_and_its_default(tmp_path, example, said):
    """``--help`` listed --optimizer and --lr with no word, and no default at all, where
    ``distconv train --help`` gives both."""
    proc = _run(example, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # argparse wraps to the terminal's width
    for words in said:
        assert words in text, proc.stdout


@pytest.mark.parametrize("given", [["--out", "a\nb"], ["--out=a\nb"]])
def test_a_refused_out_with_a_line_break_is_shown_as_a_shell_word(tmp_path, given):
    """README: a value with a character that does not print is shown as a shell word that
    pastes back as the same path, as ``distconv train`` shows it; the refusal said ``a b``, a
    path with a space, another folder."""
    first = _run("mixed_regression.py", "--epochs", "1", *given, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = _run("mixed_regression.py", "--epochs", "1", *given, cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    assert again.stderr == (
        "mixed_regression.py: error: $'a\\nb' already holds a run; pass --resume to continue "
        "it, --resume auto to continue it if it has a checkpoint, or --overwrite to replace it "
        "(in a script: resume=True, 'auto' or 'overwrite')\n"
    )
