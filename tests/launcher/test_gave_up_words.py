"""A worker's words giving up on its shards, as the launcher reads them back to lay a wait given
up on a process its stop found stopped (:func:`distconv.straggler_words.gave_up_in`): found
anywhere in a line, with any ending, and in time on any line.

The launcher reads every stopped job's failure (and each other child's last words) so: one
pattern with a lazy wildcard before each part took 8 s on a last line of 19 KB that repeats
``rank 1: no answer to ... from pserver shard(s) ...`` and never says ``within N s``, minutes on
one of 75 KB, the launcher's report held up meanwhile."""

from __future__ import annotations

import time

import pytest

from distconv.straggler_words import gave_up_in
from tests.launcher.gave_up_line import GAVE_UP


def test_the_words_are_read_from_rank_on_wherever_they_stand():
    assert gave_up_in([f"distconv.sync.errors.SyncError: {GAVE_UP}"]) == GAVE_UP
    assert gave_up_in(["epoch 1/1 step 2", f"worker 0 gave up waiting: {GAVE_UP}"]) == GAVE_UP
    assert gave_up_in(["ValueError: a label of 7"]) is None
    assert gave_up_in([GAVE_UP.partition(" within ")[0]]) is None  # no wait said: no give-up


@pytest.mark.timeout(30)
def test_a_long_line_that_never_says_the_wait_is_read_in_time():
    line = "rank 1: no answer to x from pserver shard(s) 0 " * 700  # 33 KB
    began = time.monotonic()
    assert gave_up_in([line, line]) is None
    assert time.monotonic() - began < 1.0
