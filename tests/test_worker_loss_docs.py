"""docs/operations.md's ``--on-worker-loss continue`` paragraph names where a lost rank's share
of each epoch comes from: the sampler it names must hand each rank the examples a Trainer's rank
trains (the one ``fit_start`` builds). It named ``shard_indices``, the contiguous shard of a loop
of one's own, whose examples are not a Trainer rank's: a study that counted the lost examples
from it counted others."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from distconv import fit_start, sampler

DOCS = Path(__file__).resolve().parents[1] / "docs"
N, BATCH, WORLD, SEED = 24, 3, 2, 5


def _paragraph() -> str:
    text = (DOCS / "operations.md").read_text(encoding="utf-8")
    start = text.index("`--on-worker-loss continue` (async mode)")
    return text[start : text.index("\n\n", start)]


def _trainer_rank(rank: int) -> set[int]:
    """The examples rank ``rank`` of a Trainer trains in epoch 0 (fit_start's sampler)."""
    s = fit_start.GlobalBatchSampler(N, BATCH, rank, WORLD, seed=SEED)
    return {int(i) for step in s.passes(0) for idx in step for i in idx}


def _handed(api, rank: int) -> set[int]:
    """The examples ``api`` (a sampler class, or a function of ``(n, seed, epoch, shard)``)
    hands rank ``rank`` in epoch 0."""
    if inspect.isclass(api):
        s = api(N, BATCH, rank, WORLD, seed=SEED)
        return {int(i) for step in s.passes(0) for idx in step for i in idx}
    return {int(i) for i in api(N, SEED, 0, (rank, WORLD))}


@pytest.mark.timeout(30)
def test_the_sampler_the_paragraph_names_hands_each_rank_what_a_trainer_rank_trains():
    cited = re.findall(r"`distconv\.sampler\.(\w+)`", _paragraph())
    assert cited, "the paragraph names no sampler"
    for name in cited:
        for rank in range(WORLD):
            assert _handed(getattr(sampler, name), rank) == _trainer_rank(rank), (name, rank)
    everything = set().union(*(_trainer_rank(r) for r in range(WORLD)))
    assert everything == set(np.arange(N).tolist())  # the ranks' shares make the epoch
