"""Ranks handed different data are refused at the Trainer's data check with the rule they broke
and what to do, not a hash alone: ``train_data.sampled_examples_sha256: '9d41...' here,
'0f41...' there`` said neither why nor how. The parameter server workers' check
(:func:`~distconv.sync.ps.job_check.check_all_equal`) and MPI's words
(:func:`~distconv.sync.errors.refusal_text`) both; under mpiexec and through real shards in
``tests/mpi/test_train_start.py`` and ``tests/sync/ps/test_ps_trainer_data.py``."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.data import data_facts
from distconv.rank_endings import different_jobs_in
from distconv.sync.description import as_sent, first_difference
from distconv.sync.errors import DATA_ADVICE, JobRefused, refusal_text
from distconv.sync.ps.job_check import check_all_equal
from tests.sync.test_setup_failure_words import _gather_of

X = np.arange(40 * 3, dtype=np.float32).reshape(40, 3)
Y = np.arange(40) % 4


def _facts(order: np.ndarray, test: bool = True) -> dict:
    arrays = {"x": X[order], "label": Y[order]}
    return as_sent(data_facts(arrays, arrays if test else None))


@pytest.mark.parametrize("rank", [0, 1])
def test_a_rank_shuffled_on_its_own_is_told_the_rule_and_the_fix(rank):
    shuffled = np.random.default_rng(1).permutation(40)
    ours = [_facts(np.arange(40), test=False), _facts(shuffled, test=False)]
    with pytest.raises(JobRefused) as raised:
        check_all_equal(_gather_of(ours), rank, ours[rank])
    said = str(raised.value)
    assert said.startswith(
        f"rank {rank} and rank {1 - rank} run different jobs: train_data.sampled_examples_sha256: "
    ), said
    assert said.endswith(DATA_ADVICE), said
    assert different_jobs_in([said]) == said  # the launcher reads it back whole


def test_mpis_words_advise_on_a_test_set_too_and_on_nothing_else():
    shuffled = np.random.default_rng(2).permutation(40)
    ours, theirs = _facts(np.arange(40)), {**_facts(np.arange(40)), "test_data": None}
    theirs["test_data"] = _facts(shuffled)["test_data"]  # the same training set, not the test
    said = refusal_text(1, 0, ours, theirs, first_difference(ours, theirs))
    assert said.startswith(
        "rank 1 and rank 0 run different jobs: test_data.sampled_examples_sha256: "
    ) and said.endswith(DATA_ADVICE), said
    for config in ({"config.batch_size": 8}, {"config.train_data": 8}):  # a user's key
        other = {k: 9 for k in config}
        said = refusal_text(1, 0, config, other, first_difference(config, other))
        assert (
            said == f"rank 1 and rank 0 run different jobs: {next(iter(config))}: 8 here, 9 there"
        )
    assert "fixed seed" in DATA_ADVICE and "do not shard it by rank" in DATA_ADVICE


def _refusal(ours: dict, theirs: dict) -> str:
    ours, theirs = as_sent(ours), as_sent(theirs)
    return refusal_text(1, 0, ours, theirs, first_difference(ours, theirs))


@pytest.mark.parametrize(
    "theirs, where",
    [
        ({"x": X.astype(np.float64), "label": Y}, "train_data.feeds.x: "),  # a cast of its own
        ({"x": X, "label": Y, "w": X}, "train_data.feeds.w: '<missing>' here, "),  # a feed more
        ({"image": X, "label": Y}, "train_data.feeds.image: '<missing>' here, "),  # renamed
    ],
)
def test_the_same_examples_fed_otherwise_get_no_advice_about_a_shard_or_a_seed(theirs, where):
    """Where the feeds differ (another dtype, name or feed on one rank), the ranks hold the same
    examples in the same order: a fixed seed, or the whole set, would mend nothing."""
    ours = {"x": X, "label": Y}
    said = _refusal(data_facts(ours, None), data_facts(theirs, None))
    assert said.startswith(f"rank 1 and rank 0 run different jobs: {where}"), said
    assert DATA_ADVICE not in said, said


def test_a_test_set_one_rank_lacks_gets_no_advice_about_a_shard_or_a_seed():
    arrays = {"x": X, "label": Y}
    said = _refusal(data_facts(arrays, arrays), data_facts(arrays, None))
    assert said.startswith("rank 1 and rank 0 run different jobs: test_data: {"), said
    assert said.endswith("} here, None there"), said
