"""``--resume auto``'s refusal to clear a directory holding another tool's files is worded for
the command line, the script's value after it, marked so, as the other refusals of where
``--out`` stands: it said ``pass --overwrite ('overwrite')``, the bare value read on a command
line as more to type."""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.run_dir import RunDirectory, RunDirError


def test_a_foreign_file_refusal_names_the_flag_then_the_script_s_value(tmp_path: Path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "notes.txt").write_text("mine\n")
    with pytest.raises(RunDirError) as refused:
        RunDirectory(tmp_path).clear_unfinished()
    assert str(refused.value).endswith(
        "move them away, or pass --overwrite (in a script: resume='overwrite')"
    ), refused.value
    assert (tmp_path / "checkpoints" / "notes.txt").exists()
