"""A worker set up again after a notebook cell's error, in whose traceback it is (the cell's
frame holds it), and then dropped: the end its finalizer holds notes that error, to tell it
from the one the interpreter may exit on, but must not keep it, nor so the worker, alive
once a later error took its place. Before, the dropped worker lived on, never said its bye,
and its next worker's hello read to the shard as a crashed worker's restart. A real shard on
127.0.0.1."""

from __future__ import annotations

import code
import gc
import weakref

import pytest
from ps_helpers import insecure_worker, small_net


def cell(source: str, names: dict) -> None:
    """Run ``source`` as a notebook or REPL cell, whose uncaught error is printed and kept
    (``sys.last_exc``, ``sys.last_value``) as theirs is."""
    code.InteractiveInterpreter(names).runcode(compile(source, "<cell>", "exec"))


def fit(sync, net) -> None:
    """A fit that fails after its setup: its frame, in the error's traceback, holds ``sync``."""
    sync.setup(net.parameters())
    raise ValueError("a cell failed after its setup")


@pytest.mark.timeout(60)
def test_a_worker_in_an_earlier_cells_traceback_is_collected_once_dropped(shards, capsys):
    (endpoint,) = shards.start(1, 1)
    names = {"net": small_net(), "sync": insecure_worker([endpoint])}
    names["fit"] = fit
    cell("fit(sync, net)", names)
    cell("sync.setup(net.parameters())", names)  # the next fit sets up again
    cell("raise ValueError('a later cell')", {})  # the earlier error is no longer the last
    ref = weakref.ref(names["sync"])
    names.clear()  # the notebook's names: the worker dropped
    gc.collect()
    assert ref() is None, "the dropped worker is kept alive by the error it was set up after"
    assert "a cell failed after its setup" in capsys.readouterr().err
