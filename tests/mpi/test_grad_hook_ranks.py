"""MPISync's ``grad_hook`` on a real ``mpiexec -n 2`` (``run_grad_hook.py``): clipping by
the global norm across ranks ends where one process clipping the whole batch does
(``examples/own_sync.py``'s strategy); the hook gets the global examples and the parameters
that fired on any rank; one that raises on one rank ends the job, promptly."""

from __future__ import annotations

import importlib.util
import json
import time

import numpy as np
import pytest

from distconv.optim import create_optimizer
from tests.child_env import REPO_ROOT
from tests.mpi.common import (
    AFTER_FAILED_SETUP,
    NEEDS_MPIEXEC,
    global_batches,
    max_relative,
    one_step,
    params_of,
    run_mpi,
    run_two_ranks,
    script,
    small_lenet,
    weights,
)

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

_spec = importlib.util.spec_from_file_location("own_sync", REPO_ROOT / "examples" / "own_sync.py")
EX = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(EX)

#: the norms of the steps are 3.4 to 14: every step is clipped
MAX_NORM = 1.0


def _one_process() -> tuple[dict[str, np.ndarray], list[float]]:
    """The example's strategy, one process, the whole global batch each step: the weights and
    each step's norm before clipping."""
    net = small_lenet(0)
    sync = EX.GlobalNormClipSync(create_optimizer("momentum"), MAX_NORM)
    sync.setup(net.parameters())
    norms = []
    for x, y in global_batches():
        one_step(net, sync, x, y)
        norms.append(sync.last_norm)
    return weights(net), norms


@pytest.mark.parametrize(
    ("overlap", "bucket_bytes"), [("0", 1 << 22), ("1", 1 << 22), ("0", 256), ("1", 256)]
)
def test_two_ranks_clipped_in_the_hook_end_as_one_process_clipping_the_whole_batch(
    tmp_path, overlap, bucket_bytes
):
    """2 ranks x half of each global batch (the last uneven: 4 + 3) against 1 process x the
    whole: the same norms, every step clipped, the same weights to 1e-10."""
    run_two_ranks("run_grad_hook.py", tmp_path, "clip", overlap, str(bucket_bytes), str(MAX_NORM))
    expected, norms = _one_process()
    assert min(norms) > MAX_NORM  # every step clipped
    for rank in (0, 1):
        saved = dict(np.load(tmp_path / f"rank{rank}.npz"))
        assert (saved["_buckets"] > 1) == (bucket_bytes == 256)
        np.testing.assert_allclose(saved["_norms"], norms, rtol=1e-12)
        assert max_relative(params_of(saved), expected) <= 1e-10


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_the_hook_gets_the_global_examples_and_the_parameters_fired_on_any_rank(tmp_path, overlap):
    """a fired on rank 0 alone, b on rank 1 alone, c on neither: the hook gets b and a (layout
    order) on both ranks, c absent, with the sums and 3 + 4 examples, before any update."""
    run_two_ranks("run_grad_hook.py", tmp_path, "fired", overlap)
    start = {"a": [0.0, 1.0, 2.0], "b": [1.0, 2.0, 3.0]}
    for rank in (0, 1):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        (call,) = record["calls"]
        assert call["names"] == ["b", "a"]
        assert call["examples"] == 7
        assert call["grads"] == {"a": [1.0] * 3, "b": [2.0] * 3}
        assert call["values"] == start
        # sgd at lr 0.5 on the sums over 7 examples; c as it was
        np.testing.assert_allclose(record["after"]["a"], np.arange(3.0) - 0.5 / 7)
        np.testing.assert_allclose(record["after"]["b"], np.arange(3.0) + 1 - 1.0 / 7)
        assert record["after"]["c"] == [2.0, 3.0, 4.0]


def _failed_job(tmp_path, how: str):
    began = time.monotonic()
    proc = run_mpi(["-n", "2", *script("run_grad_hook.py"), str(tmp_path), "raise", how], 60)
    return proc, time.monotonic() - began


def _assert_failed_alone(tmp_path) -> None:
    """Step 1 updated on rank 0 (sgd, lr 0.5: the sum 2 over 2 examples, -0.5 a step), not
    on rank 1, whose hook failed before any update."""
    values = [json.loads((tmp_path / f"values{r}.json").read_text()) for r in (0, 1)]
    assert values[0] == {"a": [-1.0, 0.0, 1.0], "b": [0.0, 1.0, 2.0]}  # two steps
    assert values[1] == {"a": [-0.5, 0.5, 1.5], "b": [0.5, 1.5, 2.5]}  # step 0 only


def test_a_hook_raising_on_one_rank_uncaught_aborts_the_job_promptly(tmp_path):
    """Rank 1's error goes up out of the script: the abort hook ends the job, rank 0 (waiting
    in step 2's check) with it, long before the watchdog's 120 s."""
    proc, seconds = _failed_job(tmp_path, "uncaught")
    assert proc.returncode != 0
    assert "FloatingPointError: the hook fails on rank 1" in proc.stderr, proc.stderr
    assert seconds < 30
    _assert_failed_alone(tmp_path)


def test_a_hook_raising_on_one_rank_caught_then_closed_stops_the_other_naming_it(tmp_path):
    """Rank 1 catches its error and closes: its close's last exchange meets rank 0's step 2
    check, which is refused naming rank 1 and its failed step (as after an optimizer's error
    on one rank); the job ends non-zero, promptly, nobody hung."""
    proc, seconds = _failed_job(tmp_path, "closed")
    assert proc.returncode != 0
    assert seconds < 30
    _assert_failed_alone(tmp_path)
    said = {r: (tmp_path / f"rank{r}.err").read_text() for r in (0, 1)}
    assert said[1] == "FloatingPointError: the hook fails on rank 1"
    assert said[0] == (
        "SyncError: ranks are at different points of the job (rank 0: step 2, rank 1: closed "
        "after 2 steps (its finish_step of step 1 failed)); a rank closed its sync while "
        "another went on"
    )


#: setup's refusal of a hook on buckets of sums beside averages, by the wire
MIXED = {
    "none": "sums in some buckets (float64) and averages in others (float16: cast to "
    "grad_dtype or 16-bit)",
    "float32": "sums in some buckets (float32) and averages in others (float64: cast to "
    "grad_dtype or 16-bit)",
}


@pytest.mark.parametrize(("overlap", "wire"), [("0", "none"), ("1", "none"), ("0", "float32")])
def test_a_hook_on_sums_beside_averages_is_refused_at_setup_alike_and_closes_cleanly(
    tmp_path, overlap, wire
):
    """Known once the buckets are laid out, the same on every rank: setup raises it on both
    (a refusal raised alike, as a failed job check), the next step is refused as after one,
    no hook runs, nothing moves, and close leaves the job (exit 0). It came at the first
    step, where close then aborted the job."""
    run_two_ranks("run_grad_hook.py", tmp_path, "mixed", overlap, wire)
    for rank in (0, 1):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        refused = (
            f"HookRefused: grad_hook: the gradients are {MIXED[wire]}, so no one count gives "
            "their means; give every parameter one dtype, or a 16-bit grad_dtype, with which "
            "every bucket averages"
        )
        assert record["said"]["setup"] == refused
        assert record["said"]["step"] == (
            f"SyncError: start_step after a setup that failed on every rank ({refused}): "
            f"{AFTER_FAILED_SETUP}"
        )
        assert record["calls"] == []
        assert record["after"] == {"a": [0.0, 1.0, 2.0], "b": [0.0, 1.0, 2.0]}


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_cast_after_setup_to_sums_beside_averages_is_refused_at_start_step_and_closes(
    tmp_path, overlap
):
    """Every rank casts a parameter to float16 after setup: ``start_step`` lays the buckets out
    anew, of sums beside averages. It refuses the step there, alike on every rank, before its
    check is posted (its finish_step raised it, the step open, and close aborted the job);
    cast back, the next step runs, and close leaves the job (exit 0)."""
    run_two_ranks("run_grad_hook.py", tmp_path, "cast", overlap)
    refused = (
        f"HookRefused: grad_hook: the gradients are {MIXED['none']}, so no one count gives "
        "their means; give every parameter one dtype, or a 16-bit grad_dtype, with which "
        "every bucket averages"
    )
    for rank in (0, 1):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert record["said"] == {"first": "done", "cast": refused, "back": "done"}
        assert record["calls"] == [2, 2]  # the two steps taken, their sums over 2 examples
        assert record["after"] == {"a": [-1.0, 0.0, 1.0], "b": [0.0, 1.0, 2.0]}
