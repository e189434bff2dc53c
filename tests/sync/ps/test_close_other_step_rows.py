"""A sync's close lets go of its own open step's noted rows, not of the notes another sync
keeps of the same parameter in its step: close popped every parameter's notes, open or not."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.layers.written_rows import note_rows, take_rows
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from tests.sync.ps.ps_helpers import pserver_sync


def _two_syncs_one_stepping(shards):
    """A sparse table set up in two syncs of their own shards; the second in step 1, having
    noted row 2 of the table: the table and the two syncs."""
    table = Parameter("table", np.zeros((4, 2)), sparse_rows=True)
    syncs = [pserver_sync(shards.start(1, 1), create_optimizer("sgd", lr=1.0), 0, 1) for _ in "ab"]
    for sync in syncs:
        sync.setup([table])
    syncs[1].start_step(1)
    note_rows(table, np.array([2]))
    return table, *syncs


@pytest.mark.timeout(60)
def test_closing_a_sync_between_steps_keeps_another_syncs_step_notes(shards):
    table, done, stepping = _two_syncs_one_stepping(shards)
    try:
        done.close()  # no step of its own open
        assert list(take_rows(table)) == [2]
    finally:
        done.close()
        stepping.abandon_step()
        stepping.close()


@pytest.mark.timeout(60)
def test_abandoning_no_step_keeps_another_syncs_step_notes(shards):
    """abandon_step with no step of this sync's open (called once more, in a ``finally``) let
    go of the notes another sync's open step keeps of the same parameter."""
    table, idle, stepping = _two_syncs_one_stepping(shards)
    try:
        idle.abandon_step()
        assert list(take_rows(table)) == [2]
    finally:
        idle.close()
        stepping.abandon_step()
        stepping.close()


@pytest.mark.timeout(60)
def test_setting_up_again_mid_step_lets_go_of_that_steps_notes(shards):
    """A setup again in a step cut short (a second Ctrl-C, then another fit) forgot that the
    step had opened notes of its table: neither it nor close let go of them, and each backward
    of that table after (trained on by other means) kept the rows it wrote, for no step."""
    table = Parameter("table", np.zeros((4, 2)), sparse_rows=True)
    sync = pserver_sync(shards.start(1, 1), create_optimizer("sgd", lr=1.0), 0, 1)
    try:
        sync.setup([table])
        sync.start_step(1)
        sync.setup([table])  # the step cut short is over
    finally:
        sync.close()
    note_rows(table, np.array([2]))
    assert take_rows(table) is None
