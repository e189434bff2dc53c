"""``--init-from``'s and a script's cast of another dtype (:func:`distconv.init_from.load_weights`)
goes from float to float, or integer to integer, and never into weights the cast made infinite
or wrapped: an integer parameter (a count, an index table) given floats, or float weights given
integers, would be truncated silently; a float64 weight past float16's range would be an
infinite one, whose first step ends in a NaN loss that names nothing; an int64 count past an
int32 parameter's range would wrap. Each is refused, naming the parameter, and nothing is
written."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError, save_checkpoint
from distconv.init_from import load_weights
from distconv.parameter import Parameter
from distconv.refused_starts import init_from_refused_in
from distconv.source_words import INIT_FROM_FLAG, SCRIPT_CALL, SourceWords

#: each loader's words, with the line a rank of its own ends on and what the launcher reads
#: there for a value past the dtype: the same on every attempt, so no restart
LOADERS = pytest.mark.parametrize(
    ("loader", "program", "launcher_says"),
    [
        (
            SCRIPT_CALL,
            "script.py: error: ",
            "the load_weights checkpoint holds values past this model's dtype",
        ),
        (
            INIT_FROM_FLAG,
            "distconv train: error: ",
            "the --init-from checkpoint holds values past this run's dtype",
        ),
    ],
    ids=["script", "distconv train"],
)


def saved(tmp_path, **arrays: np.ndarray):
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, [Parameter(name, a) for name, a in arrays.items()])
    return path


def test_a_float_weight_is_cast_to_another_float_type(tmp_path):
    path = saved(tmp_path, w=np.array([1.5, -2.25]))
    w = Parameter("w", np.zeros(2, np.float32))
    load_weights(path, [w])
    assert w.value.dtype == np.float32 and w.value.tolist() == [1.5, -2.25]


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [(np.array([1.7, 2.2]), np.zeros(2, np.int64)), (np.array([3, 4]), np.zeros(2))],
    ids=["float into int", "int into float"],
)
def test_another_kind_of_dtype_is_refused(tmp_path, theirs, ours):
    path = saved(tmp_path, w=theirs)
    w = Parameter("w", ours.copy())
    with pytest.raises(
        CheckpointError,
        match=rf"first difference: 'w': checkpoint dtype {theirs.dtype}, this model {ours.dtype}",
    ):
        load_weights(path, [w])
    assert np.array_equal(w.value, ours)


@LOADERS
def test_a_weight_the_cast_makes_infinite_is_refused(
    tmp_path, loader: SourceWords, program: str, launcher_says: str
):
    path = saved(tmp_path, a=np.ones(2), w=np.array([1.0, 1e6]))
    a, w = Parameter("a", np.zeros(2, np.float16)), Parameter("w", np.zeros(2, np.float16))
    with pytest.raises(CheckpointError, match="'w' holds values past float16's range") as refused:
        load_weights(path, [a, w], words=loader)
    assert not a.value.any() and not w.value.any()  # nothing written
    assert init_from_refused_in([f"{program}{refused.value}"]) == launcher_says


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        (np.array([1, 2**40]), np.zeros(2, np.int32)),
        (np.array([-1, 3]), np.zeros(2, np.uint8)),
        (np.array([300, 1]), np.zeros(2, np.int8)),
    ],
    ids=["past int32", "negative into unsigned", "past int8"],
)
@LOADERS
def test_an_integer_the_cast_wraps_is_refused(
    tmp_path, theirs, ours, loader: SourceWords, program: str, launcher_says: str
):
    """int64 counts into an int32 parameter: the cast wrapped 2**40 to 0, unsaid, where a
    float past the run's dtype is refused; both are refused alike."""
    path = saved(tmp_path, w=theirs)
    w = Parameter("w", ours.copy())
    words = rf"'w' holds values past {ours.dtype}'s range, which the cast to this model's dtype"
    with pytest.raises(CheckpointError, match=words) as refused:
        load_weights(path, [w], words=loader)
    assert np.array_equal(w.value, ours)  # nothing written
    assert init_from_refused_in([f"{program}{refused.value}"]) == launcher_says


def test_an_integer_that_fits_another_integer_type_is_cast(tmp_path):
    path = saved(tmp_path, w=np.array([-5, 2**31 - 1]))
    w = Parameter("w", np.zeros(2, np.int32))
    load_weights(path, [w])
    assert w.value.dtype == np.int32 and w.value.tolist() == [-5, 2**31 - 1]
