"""The scan of a folder of runs that both resume hints name runs from
(:mod:`distconv.run_listing`), on real folders: which entries count as runs to resume, in
which order, and the flags that resume them."""

from __future__ import annotations

import os
from pathlib import Path

from distconv.run_listing import ResumableRun, out_flags, resumable_runs


def _checkpoints(path: Path, when: int) -> None:
    """A checkpoints folder holding a checkpoint's manifest, last changed at ``when``."""
    path.mkdir(parents=True)
    (path / "step-00000012.json").write_text("{}")
    os.utime(path, (when, when))


def test_both_layouts_are_found_newest_first_and_nothing_else(tmp_path):
    runs = tmp_path / "runs"
    _checkpoints(runs / "digits-adam-seed0" / "checkpoints", 1_000)
    _checkpoints(runs / "L1" / "train" / "checkpoints", 3_000)
    _checkpoints(tmp_path / "disk" / "c", 2_000)  # a checkpoints folder on another disk
    (runs / "linked").mkdir()
    (runs / "linked" / "checkpoints").symlink_to(tmp_path / "disk" / "c")
    (runs / "L0" / "train").mkdir(parents=True)  # a launch that saved nothing: no run
    # a first checkpoint cut short (SIGKILL): a step folder no manifest names, the chief's
    # part alone, which --resume refuses as "no complete checkpoint"; an emptied folder alike
    (runs / "cut" / "checkpoints" / "step-00000012").mkdir(parents=True)
    (runs / "cut" / "checkpoints" / "step-00000012" / "chief.safetensors").write_bytes(b"x")
    (runs / "L2" / "train" / "checkpoints").mkdir(parents=True)
    (runs / "refused").mkdir()
    (runs / "a-file").write_text("")
    (runs / "file-named-so").mkdir()
    (runs / "file-named-so" / "checkpoints").write_text("")

    assert resumable_runs(runs) == [
        ResumableRun("L1", str(runs / "L1" / "train"), launched=True),
        ResumableRun("linked", str(runs / "linked"), launched=False),
        ResumableRun("digits-adam-seed0", str(runs / "digits-adam-seed0"), launched=False),
    ]
    assert resumable_runs(tmp_path / "missing") == []


def test_the_flags_name_a_few_then_count_the_rest_each_path_pasting_back_as_itself():
    named = [ResumableRun(name, f"runs/{name}", False) for name in ("a", "b c", "d\ne", "f")]
    assert out_flags(named[:1], 3, " --resume") == "--out runs/a --resume"
    assert out_flags(named[:2], 3) == "--out runs/a or --out 'runs/b c'"
    assert out_flags(named, 3) == "--out runs/a, --out 'runs/b c', --out $'runs/d\\ne' or 1 more"
