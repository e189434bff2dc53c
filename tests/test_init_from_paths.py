"""What ``--init-from PATH`` takes as a checkpoint: a run's ``checkpoints`` folder names its
newest, as the run's ``--out`` does, and was refused as holding no complete checkpoint."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from distconv.checkpoint import load_checkpoint
from distconv.init_from import load_weights
from distconv.models import lenet
from tests.test_init_from import first_run

pytestmark = pytest.mark.timeout(120)


def test_the_checkpoints_folder_itself_names_its_newest(tmp_path):
    """``RUN/checkpoints``, and the folder moved off the run (a disk of its own), alike."""
    source = first_run(tmp_path / "a")
    moved, saved = tmp_path / "disk", load_checkpoint(source).params
    shutil.copytree(tmp_path / "a" / "checkpoints", moved)
    for folder in (tmp_path / "a" / "checkpoints", moved):
        params = lenet((1, 8, 8), 4).parameters()  # float32: the float64 weights cast
        assert load_weights(folder, params).path == folder / source.relative_to(source.parents[1])
        assert all(np.array_equal(p.value, saved[p.name].astype(p.value.dtype)) for p in params)
