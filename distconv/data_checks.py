"""What :meth:`~distconv.trainer.Trainer.fit` checks of its data sets against the model before
its first step, after its sync's setup and the job check: every rank holds the same sets then,
so every rank refuses alike and none waits for another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from distconv.data import DataError, array_length
from distconv.layers.base import forward_only
from distconv.messages import exception_line


def check_test_set(
    forward: Callable[[Mapping[str, Any], np.ndarray], tuple[Any, Any]],
    train: Mapping[str, Any],
    test: Mapping[str, Any] | None,
) -> None:
    """Forward one test example: a test set the model cannot read (another image size, say)
    failed only in the first epoch's evaluation, and that epoch was lost.

    Raises:
        DataError: the test set is empty, or its example does not go through the model (one
            of the training set does: a model that reads neither fails as its first step
            would, and its traceback does not start with the test set's error).
    """
    if test is None:
        return
    if array_length(test) == 0:
        raise DataError("the test set is empty; pass test=None to evaluate on none")
    with forward_only():
        try:
            forward(test, np.arange(1))
            return
        except ValueError as exc:
            refused = exc
        forward(train, np.arange(1))  # outside the except: see Raises
    raise DataError(f"the test set does not fit the model: {exception_line(refused)}") from refused
