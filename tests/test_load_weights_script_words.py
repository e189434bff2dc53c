""":func:`distconv.init_from.load_weights` called from a script speaks of its call, the path it
was given and the model, not of ``--init-from`` and ``--dtype``, flags the script was never
passed; the command line's words stay as they were. The launcher reads the refusals of both
back (:mod:`distconv.refused_starts`)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError, save_checkpoint
from distconv.init_from import load_weights
from distconv.parameter import Parameter
from distconv.refused_starts import init_from_refused_in
from distconv.source_words import INIT_FROM_FLAG

pytestmark = pytest.mark.timeout(60)


def _saved(tmp_path, w: np.ndarray):
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, [Parameter("w", w)])
    return path


def test_a_cast_is_said_in_a_script_s_words(tmp_path, caplog):
    path = _saved(tmp_path, np.array([1.5, -2.25]))
    caplog.set_level(logging.WARNING, logger="distconv")
    load_weights(path, [Parameter("w", np.zeros(2, np.float32))])
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"load_weights {path}: casting its float64 weights to this model's float32: weights "
        "alone are loaded, so they are cast (restore_checkpoint casts none)"
    ]


def test_the_command_line_s_words_are_kept_for_it(tmp_path, caplog):
    path = _saved(tmp_path, np.array([1.5, -2.25]))
    caplog.set_level(logging.WARNING, logger="distconv")
    load_weights(path, [Parameter("w", np.zeros(2, np.float32))], words=INIT_FROM_FLAG)
    assert [r.getMessage() for r in caplog.records] == [
        f"--init-from {path}: casting its float64 weights to this run's float32 (--dtype): a "
        "new run reproduces nothing, so they are cast as it starts"
    ]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("missing", "load_weights {path}: no such file or folder"),
        ("empty", "load_weights {path}: no complete checkpoint there (a run's folder, one of its "),
    ],
)
def test_a_refusal_names_the_call_not_a_flag(tmp_path, given, said):
    path = tmp_path / given
    if given == "empty":
        path.mkdir()
    with pytest.raises(CheckpointError) as refused:
        load_weights(path, [Parameter("w", np.zeros(2))])
    assert str(refused.value).startswith(said.format(path=path)), refused.value
    assert "--" not in str(refused.value)
    line = f"fine.py: error: {refused.value}"  # run_main's, every attempt alike
    assert init_from_refused_in([line]) == "the load_weights path holds no checkpoint"
