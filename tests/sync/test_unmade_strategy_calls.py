"""A strategy whose base ``__init__`` never ran (a dataclass subclass) is told so at every
entry point, not only the Trainer's and ``setup``'s."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync
from tests.test_researcher_sync import PlainSGD, _model

_SKIPPED = r"^Quiet was made without calling super\(\)\.__init__\(optimizer, rank"


def _unmade(transport: str) -> SyncStrategy:
    """A dataclass subclass of ``transport``'s strategy, made without the base's ``__init__``."""
    base: type[SyncStrategy]
    if transport == "plain":
        base = PlainSGD
    elif transport == "local":
        base = LocalSync
    elif transport == "mpi":
        from distconv.sync.mpi import MPISync as base
    else:
        pytest.importorskip("zmq")
        from distconv.sync.ps.client import PServerSync as base
    quiet = dataclasses.dataclass(eq=False)(type("Quiet", (base,), {"__annotations__": {}}))
    return quiet()


@pytest.mark.parametrize("transport", ["plain", "local", "mpi", "pserver"])
@pytest.mark.parametrize(
    "call", [("start_step", 1), ("finish_step",), ("abandon_step",), ("close",)], ids=str
)
def test_each_step_call_and_close_name_the_skipped_base_init(transport, call):
    """They failed on "'Quiet' object has no attribute '_fired'" ('_in_step', '_socks', ...),
    or, for a strategy of one's own, started a step (which set the marker) and went on."""
    sync = _unmade(transport)
    name, *args = call
    with pytest.raises(TypeError, match=_SKIPPED):
        getattr(sync, name)(*args)


@pytest.mark.parametrize("transport", ["plain", "local", "mpi", "pserver"])
def test_close_in_a_finally_leaves_setup_s_error_unmasked(transport):
    """``try: sync.setup(...) finally: sync.close()``: close's AttributeError ("no attribute
    '_watchdog'", "... '_socks'") replaced setup's clear TypeError."""
    sync = _unmade(transport)
    with pytest.raises(TypeError, match=_SKIPPED) as info:
        try:
            sync.setup(_model()[0].parameters())
        finally:
            sync.close()
    assert info.value.__context__ is None  # setup's own, not one raised while it propagated


@pytest.mark.parametrize("transport", ["plain", "local", "mpi", "pserver"])
def test_close_in_a_finally_leaves_a_clean_exit_clean(transport):
    """``sys.exit(0)`` propagating is something propagating: close raised the TypeError over
    it, and the script ended with status 1."""
    sync = _unmade(transport)
    with pytest.raises(SystemExit) as info:
        try:
            sys.exit(0)
        finally:
            sync.close()
    assert info.value.code == 0 and info.value.__context__ is None


@pytest.mark.parametrize("transport", ["plain", "local", "mpi", "pserver"])
@pytest.mark.parametrize("read", ["step_examples", "check_gradient"])
def test_the_base_s_step_reads_name_the_skipped_base_init(transport, read):
    """A strategy of one's own reads them in its on_gradient (a script's step by hand): they
    failed on "'Quiet' object has no attribute '_stepped'" ('_known'), the error check_made
    exists to replace."""
    sync = _unmade(transport)
    param = _model()[0].parameters()[0]
    with pytest.raises(TypeError, match=_SKIPPED):
        sync.check_gradient(param) if read == "check_gradient" else sync.step_examples
