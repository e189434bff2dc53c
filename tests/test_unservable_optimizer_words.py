"""The launcher reads rank 0's refusal of an optimizer the parameter-server shards would not
rebuild (:func:`distconv.sync.ps.shard_optimizer.refuse_unservable`) as a start refused for good
(:func:`distconv.refused_starts.start_refused_in`): the same script's class meets every attempt.
Read from the refusal's own words, as a rank ends on them under ``run_main`` and as a traceback's
last line; a long line that repeats their start is read at once."""

from __future__ import annotations

import time

import numpy as np
import pytest

from distconv.optim import SGD, Adam
from distconv.refused_starts import start_refused_in, unservable_optimizer_in
from distconv.sync.ps.shard_optimizer import unservable_problem
from launcher.kept_line import KEPT_LINE_BYTES


class SignAdam(Adam):
    """A rule of its own under Adam's inherited name: the shards would build Adam."""

    def _apply(self, value, grad, state, scale):
        value -= self.lr * np.sign(grad)


class LayerNormSGD(SGD):
    """A rule that reads the whole parameter: the shards update each block alone."""

    elementwise = False


@pytest.mark.parametrize(
    "optimizer", [SignAdam(lr=0.01), LayerNormSGD(lr=0.1)], ids=["subclass", "not element-wise"]
)
@pytest.mark.parametrize(
    "before", ["script.py: error: ", "distconv.sync.errors.JobRefused: "], ids=["line", "traceback"]
)
def test_the_refusal_of_an_optimizer_is_read_as_refused_for_good(optimizer, before):
    problem = unservable_problem(optimizer)
    assert problem is not None
    said = f"optimizer {__name__}.{type(optimizer).__name__} cannot run on the parameter server"
    assert unservable_optimizer_in(["before", before + problem]) == said
    assert start_refused_in([before + problem, ""]) == said  # the last line, no cause


def test_the_words_alone_are_no_refusal():
    """A line that quotes the words without an error before them (a script's own log) says no
    refusal; nor does an optimizer the shards run."""
    assert unservable_problem(Adam(lr=0.01)) is None
    quoted = "12:00:00 optimizer a.B cannot run on the parameter server: see the docs"
    assert unservable_optimizer_in([quoted]) is None
    assert start_refused_in([quoted, ""]) is None


def test_a_long_line_that_repeats_the_refusal_s_start_is_read_at_once():
    line = "x: error: " + "error: optimizer a.B" * (KEPT_LINE_BYTES // 20)
    took = time.perf_counter()
    assert unservable_optimizer_in([line]) is None
    took = time.perf_counter() - took
    assert took < 0.5, f"{took:.2f} s for a line of {len(line)} characters"
