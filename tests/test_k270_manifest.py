"""Review k270: a manifest whose step is not a whole number is damaged, named as such."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import save_checkpoint
from distconv.parameter import Parameter
from distconv.run_dir import RunDirectory


@pytest.mark.parametrize("step", ["1e999", "2.5", "true", '"2"'])
def test_a_manifest_whose_step_is_not_an_int_is_reported_damaged_beside_good_ones(tmp_path, step):
    """``1e999`` (infinity to json) escaped the scan as an OverflowError, a traceback in place
    of "skipping a checkpoint"; 2.5 and true were taken as steps 2 and 1."""
    run = RunDirectory(tmp_path)
    for n in (1, 2):
        part = run.step_dir(n) / "chief.safetensors"
        save_checkpoint(part, [Parameter("w", np.zeros(2))], step=n)
        run.commit(n, {"chief": part})
    manifest = run.checkpoint_root / "step-00000002.json"
    manifest.write_text(manifest.read_text().replace('"step": 2', f'"step": {step}'))
    complete, problems = run.scan()
    assert [m.step for m in complete] == [1]
    (problem,) = problems
    assert problem.startswith(f"{manifest} is damaged (TypeError: ")


@pytest.mark.parametrize("keep", [2.5, True, "3", None])
def test_a_keep_that_is_not_a_count_is_refused_when_the_run_directory_is_made(tmp_path, keep):
    """2.5 (and True) were taken, and the first save's prune failed after its manifest was
    written ("slice indices must be integers"); "3" and None failed comparing with 1."""
    with pytest.raises(ValueError, match=r"keep must be an int >= 1, got"):
        RunDirectory(tmp_path, keep=keep)
