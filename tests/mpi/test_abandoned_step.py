"""A step the Trainer abandons (a layer raised mid-backward) on MPISync: what comes after it is
refused with a SyncError, as LocalSync refuses it, and the next setup (a second fit) trains on;
world size 1 in this process, and real ``mpiexec -n 2``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm
from tests.mpi.common import (
    NEEDS_MPIEXEC,
    WAYS_ON,
    assert_moved,
    bucket_params,
    open_step,
    run_mpi,
    run_two_ranks,
    script,
)


def needs_mpiexec(test):
    for mark in NEEDS_MPIEXEC:
        test = mark(test)
    return test


def _abandoned(overlap: bool) -> tuple[MPISync, list[Parameter]]:
    """A one-rank sync whose step 0 was abandoned after one of its two gradients fired."""
    sync = MPISync(create_optimizer("sgd", lr=0.5), comm=SingleRankComm(), overlap=overlap)
    params = bucket_params()
    open_step(sync, params, 1.0)
    sync.abandon_step()
    return sync, params


@pytest.mark.timeout(30)
@pytest.mark.parametrize("overlap", [False, True])
def test_a_gradient_or_finish_step_after_an_abandoned_step_is_a_sync_error(overlap):
    """Before, a gradient handed in after abandon_step was a bare AttributeError ('NoneType'
    object has no attribute 'append', LocalSync's ``_fired = None``) and finish_step a
    TypeError, after it had run the abandoned step's optimizer."""
    sync, params = _abandoned(overlap)
    before = [p.value.copy() for p in params]
    try:
        with pytest.raises(SyncError, match=r"gradient of 'a' arrived outside a step"):
            params[0].inc_update(sync)
        with pytest.raises(SyncError, match=r"finish_step without start_step"):
            sync.finish_step()
        with pytest.raises(SyncError, match=r"start_step after step 0 \(no finish_step"):
            sync.start_step(1)
        # no update before finish_step: the state of the last whole step, handed out (before,
        # "no optimizer state in the middle of step 0", as if it held a step applied in part)
        assert sync.state_dict() == {"a": {}, "b": {}}
        for p, value in zip(params, before):
            np.testing.assert_array_equal(p.value, value, err_msg=p.name)
    finally:
        sync.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("overlap", [False, True])
def test_the_next_setup_after_an_abandoned_step_trains_on(overlap):
    """The contract: what an abandoned step leaves waits for the next setup (a second fit).
    Before, that setup raised "no exchange (comparing the job ...) while step 0's check is
    open": the abandoned step's check was never completed."""
    sync, params = _abandoned(overlap)
    try:
        sync.setup(params, {})
        for p in params:
            p.grad[...] = 0
        sync.start_step(1)
        for p in reversed(params):
            p.grad += 1.0
            p.inc_update(sync)
        sync.finish_step()
    finally:
        sync.close()
    for i, p in enumerate(params):
        np.testing.assert_allclose(p.value, np.arange(3.0) + i - 0.5, err_msg=p.name)


@needs_mpiexec
@pytest.mark.timeout(120)
def test_over_mpi_an_abandoned_step_refuses_what_follows_and_close_ends_the_job(tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_abandon.py"), str(tmp_path), "refused"], timeout=90)
    assert proc.returncode != 0, proc.stderr  # the step is open: close aborts, nobody hangs
    assert "sync closed in the middle of step 0" in proc.stderr, proc.stderr
    for rank in (0, 1):
        said = json.loads((tmp_path / f"refused{rank}.json").read_text())
        assert said == {
            "gradient": "SyncError: gradient of 'a' arrived outside a step: call "
            "start_step(examples) before backward, finish_step() after it",
            "finish_step": "SyncError: finish_step without start_step",
            # no update before finish_step: the abandoned step left the last whole one
            "state_dict": "nothing",
            "start_step": "SyncError: start_step after step 0 (no finish_step, or it failed): "
            + WAYS_ON,  # the next test takes the first: a setup trains on
        }, (rank, said)


@needs_mpiexec
@pytest.mark.timeout(120)
def test_over_mpi_the_next_setup_after_an_abandoned_step_trains_on(tmp_path):
    run_two_ranks("run_abandon.py", tmp_path, "refit")
    assert_moved(tmp_path, 0.75)  # the gradients' mean over the ranks, 1.5, at lr 0.5
