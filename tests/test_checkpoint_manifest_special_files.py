"""A named pipe (or socket, or device) holding a manifest's name in a run's ``checkpoints``
folder: the scan that ``--resume``, ``evaluate --from`` and ``--init-from`` of a run folder
make opened it, and a pipe without a writer held them for ever. It is named for what it is,
with what to do, and passed over as a directory there is: nothing is renamed or lost."""

from __future__ import annotations

import os

import pytest

from distconv.checkpoint_paths import NoCompleteCheckpointError, checkpoint_file
from distconv.run_dir import CHIEF, RunDirectory

pytestmark = [
    pytest.mark.timeout(20),  # the bug: a hang, not a failure
    pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here"),
]


def _run_with_checkpoint(tmp_path, step: int) -> RunDirectory:
    """A run folder holding one complete checkpoint at ``step``."""
    run = RunDirectory(tmp_path / "run")
    part = run.step_dir(step) / "chief.safetensors"
    part.write_bytes(b"x")
    run.commit(step, {CHIEF: part})
    return run


def test_a_pipe_as_the_newest_manifest_is_named_and_passed_over(tmp_path):
    run = _run_with_checkpoint(tmp_path, 2)
    fifo = run.checkpoint_root / "step-00000003.json"
    os.mkfifo(fifo)
    complete, problems = run.scan()
    assert [m.step for m in complete] == [2]
    assert problems == [
        f"{fifo} is a named pipe (FIFO), not a manifest (a save writes a regular file): move "
        f"it out of {run.checkpoint_root}"
    ]
    assert checkpoint_file(run.root) == run.step_dir(2) / "chief.safetensors"
    assert os.path.exists(fifo)  # left where it is: nothing renamed


def test_a_pipe_as_the_only_manifest_is_no_checkpoint_naming_it(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.checkpoint_root.mkdir(parents=True)
    fifo = run.checkpoint_root / "step-00000003.json"
    os.mkfifo(fifo)
    with pytest.raises(NoCompleteCheckpointError) as refused:
        checkpoint_file(run.root)
    assert f"{fifo} is a named pipe (FIFO), not a manifest " in str(refused.value)


def test_a_saves_pruning_passes_a_pipe_over(tmp_path):
    """A save prunes by the same scan: it held the training step for ever."""
    run = RunDirectory(tmp_path / "run", keep=1)
    run.checkpoint_root.mkdir(parents=True)
    os.mkfifo(run.checkpoint_root / "step-00000009.json")
    for step in (2, 4):
        part = run.step_dir(step) / "chief.safetensors"
        part.write_bytes(b"x")
        run.commit(step, {CHIEF: part})
    names = sorted(p.name for p in run.checkpoint_root.iterdir())
    assert names == ["step-00000004", "step-00000004.json", "step-00000009.json"]
