"""What a resume takes from a checkpoint's epoch sums (``share_position``): the push counts and
each rank's waits where the checkpoint has them, none where it does not (an older distconv's,
whose resumed epoch counts them from the resume, as before) or has them for another number of
ranks. One rank (LocalSync): the chief's sums are every rank's."""

from __future__ import annotations

from distconv.epoch_sums import CARRIED, PUSH_COUNTS, RANK_LOSS, RANK_WAITS, share_position
from distconv.optim import create_optimizer
from distconv.resume import Position
from distconv.sync.local import LocalSync

#: an older checkpoint's sums, 4 steps into its epoch
OLDER = {"loss": 3.25, "correct": 2.0, "examples": 8.0, "seconds": 1.5, RANK_LOSS: [3.25]}


def _shared(sums: dict) -> dict:
    sync = LocalSync(create_optimizer("sgd"))
    return share_position(sync, Position(0, 4, 4, sums, [], 1)).sums


def test_a_checkpoint_carries_its_push_counts_and_waits_to_the_resume():
    sums = {**OLDER, PUSH_COUNTS[0]: 45.0, PUSH_COUNTS[1]: 3.0, RANK_WAITS: [0.125]}
    assert set(sums) == set(CARRIED)
    assert _shared(sums) == sums


def test_an_older_checkpoint_resumes_without_them():
    assert _shared(OLDER) == OLDER


def test_waits_of_another_number_of_ranks_are_left_out():
    assert _shared({**OLDER, RANK_WAITS: [0.5, 0.25]}) == OLDER
