"""Pieces moved out of modules at the line cap into modules of their own: each name is the same
object where callers import it from, and a mixin moved out of a class keeps the class's bases
in their order, the contract's guard on the method it now takes from the mixin."""

from __future__ import annotations

import importlib
import inspect

import pytest


def test_mpisync_takes_finish_step_from_finishing_guarded_its_bases_in_order():
    from distconv.sync.mpi.finishing import Finishing
    from distconv.sync.mpi.sync import MPISync

    assert [c.__name__ for c in MPISync.__mro__] == [
        "MPISync",
        "Arrivals",
        "Finishing",
        "Abandon",
        "CheckCompletion",
        "Shutdown",
        "BucketLayout",
        "SetupStart",
        "RankCollectives",
        "StepNumbers",
        "LocalSync",
        "SyncStrategy",
        "StepCount",
        "ABC",
        "object",
    ]
    assert MPISync.finish_step._guarded  # wrapped by SyncStrategy's subclass hook
    assert super(MPISync, MPISync).finish_step is Finishing.finish_step
    assert MPISync._apply is Finishing._apply


#: (the module callers import from, the module the names moved to, the names)
MOVED = [
    (
        "distconv.sync.local",
        "distconv.sync.local_state",
        ["RUNS", "state_problems", "is_count", "per_row_count", "not_numbers", "not_counts"],
    ),
    ("distconv.checkpoint", "distconv.checkpoint_load", ["load_checkpoint"]),
    ("distconv.gradient_check", "distconv.gradient_check_guards", ["kept"]),
]


@pytest.mark.parametrize(("old", "new", "names"), MOVED, ids=[m[0] for m in MOVED])
def test_a_moved_name_is_the_same_object_where_callers_import_it(old, new, names):
    before, after = importlib.import_module(old), importlib.import_module(new)
    assert [n for n in names if getattr(before, n) is not getattr(after, n)] == []


def test_the_contract_takes_its_step_count_from_step_count_guarded():
    from distconv.sync.base import SyncStrategy
    from distconv.sync.local import LocalSync
    from distconv.sync.step_count import StepCount

    names = ["LocalSync", "SyncStrategy", "StepCount", "ABC", "object"]
    assert [c.__name__ for c in LocalSync.__mro__] == names
    assert SyncStrategy.start_step._guarded  # its subclasses' super().start_step() reach it
    assert inspect.unwrap(SyncStrategy.start_step) is StepCount.start_step
    assert SyncStrategy.start_at is StepCount.start_at
    abstract = {"on_gradient", "finish_step", "state_dict", "load_state_dict"}
    assert SyncStrategy.__abstractmethods__ == abstract
