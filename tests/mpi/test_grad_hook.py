"""MPISync's ``grad_hook`` on one rank (:class:`SingleRankComm`, no MPI): called once a step
with every gradient the optimizer will read, before any update, the thread on too (where each
bucket was updated as soon as it was reduced); a failing hook updates nothing."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.description import sync_scheme
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.hook import HookRefused
from tests.mpi.common import bucket_params, bucket_sync, fire


class Seen:
    """A hook recording, per call, the parameters' names, values and gradients as it got them
    and the examples; ``then`` (if any) is called after, with the parameters."""

    def __init__(self, then=None) -> None:
        self.calls: list[dict] = []
        self.then = then

    def __call__(self, params: list[Parameter], examples: int) -> None:
        self.calls.append(
            {
                "names": [p.name for p in params],
                "values": {p.name: p.value.copy() for p in params},
                "grads": {p.name: p.grad.copy() for p in params},
                "dtypes": {p.name: p.grad.dtype for p in params},
                "examples": examples,
            }
        )
        if self.then is not None:
            self.then(params)


def one_step(sync: MPISync, params: list[Parameter], examples: int, grads: dict[str, float]):
    """A step of ``examples`` in which each named parameter fires its gradient, last first."""
    sync.start_step(examples)
    for p in reversed(params):
        if p.name in grads:
            fire(sync, p, grads[p.name])
    sync.finish_step()


@pytest.mark.parametrize("overlap", [True, False])
def test_the_hook_sees_every_reduced_gradient_before_any_update(overlap):
    """Three buckets; with the thread, each bucket was updated once reduced, so a hook called
    there would have seen the first bucket's parameter moved already. It sees every value as
    it was, the sums, and the global examples; it halves them, which the update then uses."""
    hook = Seen(then=lambda params: [np.multiply(p.grad, 0.5, out=p.grad) for p in params])
    sync = bucket_sync(comm=SingleRankComm(), overlap=overlap, grad_hook=hook)
    params = bucket_params("abc")
    sync.setup(params, {})
    try:
        assert sync.overlap is overlap and len(sync.buckets) == 3
        one_step(sync, params, 4, {"a": 2.0, "b": 4.0})  # c fires nowhere
    finally:
        sync.close()
    (call,) = hook.calls
    assert call["names"] == ["b", "a"]  # laid out c, b, a; c fired on no rank: absent
    assert call["examples"] == 4
    for i, (name, grad) in enumerate([("a", 2.0), ("b", 4.0)]):
        np.testing.assert_array_equal(call["values"][name], np.arange(3.0) + i)  # not updated
        np.testing.assert_array_equal(call["grads"][name], np.full(3, grad))
        # sgd at lr 0.5 on the halved sums over 4 examples
        np.testing.assert_array_equal(params[i].value, np.arange(3.0) + i - 0.5 * grad / 2 / 4)
    np.testing.assert_array_equal(params[2].value, np.arange(3.0) + 2)
    assert all(not p.grad.any() for p in params)


def test_on_a_cast_wire_the_hook_sees_the_averages_and_divides_by_one():
    """A ``grad_dtype`` other than the gradients' averages on the way (the optimizer's scale is
    then 1): the hook gets those averages, in the parameters' own dtype, and ``examples`` 1,
    so ``p.grad / examples`` is the mean on every wire (it got the global count, 4, and a clip
    by the mean's norm took averages for sums: its norm 4 times too small, it under-clipped)."""
    hook = Seen()
    sync = bucket_sync(comm=SingleRankComm(), overlap=True, grad_dtype="float16", grad_hook=hook)
    params = bucket_params("ab")
    sync.setup(params, {})
    try:
        one_step(sync, params, 4, {"a": 2.0, "b": 4.0})
    finally:
        sync.close()
    (call,) = hook.calls
    assert call["examples"] == 1
    assert call["dtypes"] == {"a": np.float64, "b": np.float64}
    np.testing.assert_array_equal(call["grads"]["a"], np.full(3, 0.5))
    np.testing.assert_array_equal(call["grads"]["b"], np.full(3, 1.0))
    np.testing.assert_array_equal(params[1].value, np.arange(3.0) + 1 - 0.5 * 1.0)


def _refused_at_setup(grad_dtype: str | None, other: type, match: str) -> None:
    """A float64 parameter beside one of ``other`` on a ``grad_dtype`` wire: buckets of sums
    beside averages, so no one ``examples`` gives the hook every mean; setup refuses it (a
    refusal every rank raises alike), the step after it is refused as after a failed job
    check, and nothing is updated, no hook called."""
    hook = Seen()
    sync = bucket_sync(comm=SingleRankComm(), grad_dtype=grad_dtype, grad_hook=hook)
    params = [Parameter("a", np.arange(3.0)), Parameter("b", np.arange(3, dtype=other))]
    try:
        with pytest.raises(HookRefused, match=match) as refused:
            sync.setup(params, {})
        assert refused.value.raised_alike
        with pytest.raises(SyncError, match="start_step after a setup that failed on every rank"):
            sync.start_step(2)
    finally:
        sync.close()
    assert hook.calls == []
    np.testing.assert_array_equal(params[0].value, np.arange(3.0))


def test_a_16_bit_parameter_beside_a_wider_one_is_refused_at_setup():
    """Known once the buckets are laid out: refused there, not at the first step."""
    match = r"sums in some buckets \(float64\) and averages in others \(float16"
    _refused_at_setup(None, np.float16, match)


def test_a_parameter_cast_to_16_bits_after_setup_is_refused_at_start_step():
    """``start_step`` lays the buckets out anew where a parameter was cast (or frozen, or
    unfrozen) since, without a setup: it refuses that layout there (``HookRefused``, before the
    step's check is posted: nothing open), at every step until the dtypes are one again; cast
    back, the step runs."""
    hook = Seen()
    sync = bucket_sync(comm=SingleRankComm(), grad_hook=hook)
    params = bucket_params("ab")
    sync.setup(params, {})
    try:
        params[1].cast(np.float16)
        match = r"sums in some buckets \(float64\) and averages in others \(float16"
        for _ in range(2):
            with pytest.raises(HookRefused, match=match):
                sync.start_step(2)
        assert hook.calls == []
        params[1].cast(np.float64)
        one_step(sync, params, 2, {"a": 1.0, "b": 1.0})
    finally:
        sync.close()
    assert [call["examples"] for call in hook.calls] == [2]


def _failing(params: list[Parameter]) -> None:
    raise FloatingPointError("the hook fails")


def _refused_step(then, raised: type, match: str, overlap: bool | None = None) -> MPISync:
    """A step whose hook runs ``then``: it raises ``raised`` (matching ``match``) with no
    parameter moved; returns the sync, still open, for what the caller checks next (the
    caller closes it)."""
    sync = bucket_sync(comm=SingleRankComm(), overlap=overlap, grad_hook=Seen(then=then))
    params = bucket_params("ab")
    sync.setup(params, {})
    try:
        with pytest.raises(raised, match=match):
            one_step(sync, params, 1, {"a": 1.0, "b": 1.0})
        for i, p in enumerate(params):
            np.testing.assert_array_equal(p.value, np.arange(3.0) + i)
    except BaseException:
        sync.close()
        raise
    return sync


@pytest.mark.parametrize("overlap", [True, False])
def test_a_failing_hook_updates_nothing_and_the_step_stays_failed(overlap):
    """The hook's error is finish_step's; no parameter moved (the thread's first bucket
    neither); the next step is refused as after any failed finish_step."""
    sync = _refused_step(_failing, FloatingPointError, "the hook fails", overlap)
    try:
        with pytest.raises(SyncError, match="start_step after step 0"):
            sync.start_step(1)
    finally:
        sync.close()


def test_a_gradient_the_hook_rebinds_is_refused_before_any_update():
    """Rebinding ``p.grad`` (not in place) would leave the optimizer reading an array of the
    hook's, not the bucket's: refused before the first bucket is updated."""

    def rebind(params: list[Parameter]) -> None:
        params[-1].grad = params[-1].grad * 0.5

    _refused_step(rebind, SyncError, "the gradient of 'a' was replaced").close()


def test_a_hook_that_is_no_callable_is_refused():
    with pytest.raises(TypeError, match="grad_hook must be callable or None, got 1.0"):
        MPISync(create_optimizer("sgd"), comm=SingleRankComm(), grad_hook=1.0)


def _clip(params: list[Parameter], examples: int, max_norm: float) -> None:
    """A clipping hook's signature (this test only reads how it is recorded)."""


def test_the_hook_is_recorded_in_the_scheme_a_run_writes_and_no_hook_is_not():
    """It changes what a run computes, as ``grad_dtype`` does: the scheme (the first metrics
    line, a checkpoint's, compared on resume) names it and its settings; none, no key."""
    hook = functools.partial(_clip, max_norm=0.5)
    scheme = sync_scheme(MPISync(create_optimizer("sgd"), comm=SingleRankComm(), grad_hook=hook))
    assert scheme == {
        "sync": "mpi",
        "bucket_bytes": 4 << 20,
        "grad_hook": {
            "class": "partial",
            "fields": {
                "func": "<function tests.mpi.test_grad_hook._clip>",
                "args": [],
                "keywords": {"max_norm": 0.5},
            },
        },
    }
    plain = sync_scheme(MPISync(create_optimizer("sgd"), comm=SingleRankComm()))
    assert plain == {"sync": "mpi", "bucket_bytes": 4 << 20}


@pytest.mark.parametrize(
    ("wire", "dtypes"),
    [(None, (np.float64, np.float16)), ("float32", (np.float64, np.float32))],
)
def test_without_a_hook_parameters_of_several_dtypes_train_as_before(wire, dtypes):
    """The refusal of sums beside averages is the hook's (no one ``examples`` fits both);
    without a hook each bucket's optimizer scales its own, as before it. It was made at every
    step, hook or none: a model with a 16-bit parameter beside a float64 one (or float64 and
    float32 ones on a float32 wire) failed its first step, 2 ranks aborting their job."""
    sync = bucket_sync(comm=SingleRankComm(), grad_dtype=wire)
    params = [
        Parameter("a", np.arange(3.0, dtype=dtypes[0])),
        Parameter("b", np.arange(3.0, dtype=dtypes[1])),
    ]
    sync.setup(params, {})
    try:
        one_step(sync, params, 2, {"a": 1.0, "b": 1.0})
    finally:
        sync.close()
    for p, dtype in zip(params, dtypes):  # sgd at lr 0.5 on the mean, 1 / 2 a step
        assert p.value.dtype == dtype
        np.testing.assert_array_equal(p.value, np.arange(3.0) - 0.25)


def test_float64_beside_float32_on_a_float32_wire_is_refused_naming_their_dtypes():
    """The float64 bucket is cast to the wire (averages), the float32 one is not (sums): the
    refusal names them. It said "16-bit parameters beside wider ones" where none was 16-bit."""
    match = r"sums in some buckets \(float32\) and averages in others \(float64: "
    _refused_at_setup("float32", np.float32, match)
