"""``distconv train``'s refusals of where ``--out`` stands are worded for the command line, the
script's values after them, marked so.

They showed the Python API's values beside the flags (``pass --resume (resume=True) to continue
it, --resume auto ('auto') ...``, ``--resume (resume=True): no complete checkpoint``), read on a
command line as more to type."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.child_env import child_env
from tests.processes import run_job

SMALL = ("--data", "synthetic", "--batch-size", "32", "--no-progress")


def _holding_a_run(out: Path) -> None:
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"epoch": 1}\n')  # what a run leaves: no training here


def _holding_an_old_checkpoint(out: Path) -> None:
    out.mkdir()
    (out / "checkpoint.safetensors").write_bytes(b"old")


#: the refusal of a directory whose one checkpoint is distconv 0.1's, with or without --resume:
#: it advised --overwrite alone, which deletes that run's only weights, and without --resume
#: "pass --resume to continue it", which is then refused
OLD_CHECKPOINT = (
    "{out} holds a checkpoint of an older distconv (checkpoint.safetensors, format version 1, "
    "from before step checkpoints), which this version cannot resume. It holds that run's "
    "weights (distconv.checkpoint.restore_checkpoint(path, params) loads them into a model), "
    "which --overwrite deletes: to keep them, move it out of {out} first; then pass "
    "--overwrite to replace the run (in a script: resume='overwrite'), or train in another "
    "output directory (--out)"
)

CASES = [
    (
        _holding_a_run,
        (),
        "{out} already holds a run; pass --resume to continue it, --resume auto to continue it "
        "if it has a checkpoint, or --overwrite to replace it (in a script: resume=True, 'auto' or "
        "'overwrite')",
    ),
    (
        lambda out: out.mkdir(),
        ("--resume",),
        "--resume: no complete checkpoint in {out}/checkpoints; "
        "--resume auto starts a fresh run where there is none (in a script: resume='auto', "
        "not True)",
    ),
    (
        lambda out: None,
        ("--resume",),
        "--resume: no complete checkpoint in {out}/checkpoints: {out} does not exist: check "
        "--out; where it is right, "
        "--resume auto starts a fresh run where there is none (in a script: resume='auto', "
        "not True)",
    ),
    (_holding_an_old_checkpoint, ("--resume",), OLD_CHECKPOINT),
    (_holding_an_old_checkpoint, (), OLD_CHECKPOINT),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "make, flags, said",
    CASES,
    ids=["holds-a-run", "no-checkpoint", "no-out", "old-checkpoint", "old-checkpoint-no-resume"],
)
def test_a_refused_out_is_one_line_in_flags_with_the_script_s_words_marked(
    tmp_path: Path, make: Callable[[Path], None], flags: tuple[str, ...], said: str
):
    out = tmp_path / "run"
    make(out)
    argv = [sys.executable, "-m", "distconv", "train", *SMALL, "--out", str(out), *flags]
    done = run_job(argv, env=child_env(), timeout=30)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert errors == [f"distconv train: error: {said.format(out=out)}"], done.stderr
