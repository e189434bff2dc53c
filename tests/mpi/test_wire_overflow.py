"""A 16-bit gradient wire at the edges of its range.

float16 holds nothing past 65,504: an average gradient (or the ranks' sum of averages) beyond
that became infinity on the wire, and the optimizer wrote it into the parameters without a word,
where one process in float64 trains on. It is an error now, naming the bucket, before the
optimizer reads it. At the other end float16 flushes averages under about 3e-8 to zero, while
bfloat16, with float32's range, keeps them (documented in docs/architecture.md).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from distconv import backend
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.comm import WireRefused
from tests.mpi.common import HERE, mpiexec, one_rank_step, run_mpi

START = np.array([1.0, -1.0, 0.5])


def one_step(grad_dtype: str, grad: np.ndarray, overlap: bool, examples: int = 1) -> Parameter:
    """One SGD step (learning rate 0.01) of a float64 parameter on a world of one."""
    param = Parameter("w", START.copy())
    return one_rank_step(param, grad, examples, grad_dtype=grad_dtype, overlap=overlap)


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("overlap", [False, True])
def test_an_average_past_float16s_range_is_an_error_not_an_infinite_parameter(overlap):
    """The refusal alone: the cast into the wire that overflows, exactly what it reports, no
    longer warns of it first (numpy's ``overflow encountered``, on every rank). With the
    communication thread it reaches the main thread as the same refusal, in the same words
    (raised alike: a plain SyncError had the job abort), chained to the thread's own."""
    with pytest.raises(SyncError, match=r"bucket 0 \(w\).*not finite.*float16.*65504") as caught:
        one_step("float16", np.array([1e6, 1.0, -2.0]), overlap)
    assert type(caught.value) is WireRefused, caught.value
    assert str(caught.value).startswith("gradient bucket 0 (w) is not finite after the float16")
    if overlap:
        assert type(caught.value.__cause__) is WireRefused


@pytest.mark.timeout(60)
def test_an_overflow_into_a_float32_wire_still_warns():
    """A native wire is not checked (:meth:`~distconv.sync.mpi.buckets.Bucket.check_wire`):
    numpy's warning is all that tells of an average past float32's range there."""
    with pytest.warns(RuntimeWarning, match="overflow"):
        one_step("float32", np.array([1e39, 1.0, -2.0]), overlap=False)


@pytest.mark.timeout(60)
def test_bfloat16_carries_the_same_average():
    pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    value = one_step("bfloat16", np.array([1e6, 1.0, -2.0]), False).value
    assert np.all(np.isfinite(value))
    # 1e6 is 999,424 in bfloat16 (8 bits of mantissa): the step is 0.01 of that
    np.testing.assert_allclose(value, [1.0 - 9994.24, -1.01, 0.52])


@pytest.mark.timeout(60)
def test_float16_flushes_averages_under_its_smallest_subnormal_to_zero():
    pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    # a sum of 2e-4 over 10,000 examples: an average of 2e-8, under half of 2**-24
    grad = np.array([2e-4, 2e-4, 2.0])
    flushed = one_step("float16", grad, False, examples=10_000).value
    kept = one_step("bfloat16", grad, False, examples=10_000).value
    assert flushed[0] == START[0] and flushed[1] == START[1]  # the tiny ones: no step at all
    np.testing.assert_allclose(flushed[2], 0.5 - 0.01 * 2e-4, rtol=1e-3)
    np.testing.assert_allclose(kept[:2], START[:2] - 0.01 * 2e-8, rtol=1e-2)


@pytest.mark.mpi
@pytest.mark.timeout(60)
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("overlap", ["0", "1", "device"])
def test_two_ranks_whose_float16_sum_overflows_stop_with_their_parameters_untouched(
    overlap, tmp_path
):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    command = [sys.executable, "-m", "mpi4py", str(HERE / "run_wire_overflow.py")]
    proc = run_mpi(["-n", "2", *command, overlap, str(tmp_path)], timeout=45)
    assert proc.returncode != 0
    # the float16 sum's overflow is the refusal's to say: no numpy warning of it first
    assert "RuntimeWarning" not in proc.stderr, proc.stderr[-3000:]
    for rank in range(2):  # each rank's sum is finite alone: only the ranks' sum overflows
        record = (tmp_path / f"rank{rank}.err").read_text()
        # the wire's refusal in its own words, with the thread too (a SyncError's there before)
        assert record.startswith("WireRefused: gradient bucket 0 (w) is not finite"), record
        np.testing.assert_array_equal(np.load(tmp_path / f"rank{rank}.npy"), START)


@pytest.mark.mpi
@pytest.mark.timeout(60)
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("overlap", ["0", "1", "device", "mixed-early", "mixed-late"])
def test_a_refused_float16_wire_caught_closes_cleanly(overlap, tmp_path):
    """The refusal caught, each rank closes its sync. Without the communication thread every
    rank refused the step at the same bucket once every collective before it was complete, and
    none starts a later one: the ranks leave together (the job exits 0; it aborted). With the
    thread every rank's did alike after the refusal (skipped what it had queued, or, for a
    device bucket refused on the main thread, reduced the later buckets), and every rank's
    started the flags: close completes them and leaves (it aborted). So where a host
    bucket after the device one was refused on every rank's thread too, unreported (the main
    thread raised the device bucket's first): close aborted, a traceback on every rank:
    refused before close (``mixed-early``), or while close drained the flags (``mixed-late``),
    each in that order on every run (``mixed`` reached one or the other by timing)."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    command = [sys.executable, "-m", "mpi4py", str(HERE / "run_wire_overflow.py")]
    proc = run_mpi(["-n", "2", *command, overlap, str(tmp_path), "caught"], timeout=45)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in range(2):
        assert "not finite" in (tmp_path / f"rank{rank}.err").read_text()
        np.testing.assert_array_equal(np.load(tmp_path / f"rank{rank}.npy"), START)


@pytest.mark.mpi
@pytest.mark.timeout(60)
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("overlap", ["0", "1", "device"])
def test_run_main_says_a_refused_float16_wire_in_one_line(overlap, tmp_path):
    """run_main's one line for a WireRefused, raised alike on every rank, with the sync closed
    in a ``finally`` (the README's script): close exempted a JobMismatch alone from its abort,
    so without the communication thread the job aborted with a traceback on every rank,
    though every rank refused the same bucket once the step's collectives were complete.
    So with the thread: a bare WireRefused on the main thread (a device bucket's,
    as a GPU's), or a SyncError from the thread's, aborted the job with a traceback. Its last
    value overflows on each rank alone, with opposite signs: no numpy warning of the ranks'
    inf + -inf (NaN) comes first either (the float32 sum warned ``invalid value encountered in
    reduce``)."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    command = [sys.executable, str(HERE / "run_wire_overflow.py"), overlap, str(tmp_path)]
    proc = run_mpi(["-n", "2", *command, "run_main"], timeout=45)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "RuntimeWarning" not in proc.stderr, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "not finite after the float16" in line]
    assert "Traceback" not in proc.stderr and "abort" not in proc.stderr, proc.stderr[-3000:]
    assert len(said) == 2 and all(
        line.startswith("run_wire_overflow.py: error: gradient bucket 0 (w) is not finite")
        for line in said
    ), proc.stderr[-3000:]
    for rank in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f"rank{rank}.npy"), START)


def float16_params_step(params: list[Parameter], grad_dtype: str | None) -> None:
    """One SGD step over ``params`` on a world of one, every gradient 1."""
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), grad_dtype=grad_dtype)
    sync.setup(params, {})
    try:
        sync.start_step(1)
        for p in params:
            p.grad += 1.0
            sync(p)
        sync.finish_step()
    finally:
        sync.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("dtype, wire", [(np.float64, "float16"), (np.float16, None)])
def test_the_wire_check_neither_takes_a_blas_dot_nor_isfinite_over_the_bucket(
    dtype, wire, monkeypatch
):
    """The check ran ``all_finite`` over the cast-back gradients: for float64 ones a BLAS dot
    that wakes BLAS's threads (8 ms a 4 MiB bucket on two shared cores, more than the
    reduction), for float16 ones ``isfinite`` over float16 (2 ms, a fifth of the reduction).
    It reads the 16-bit wire's bits instead (0.1 ms)."""
    calls: list[str] = []
    real_dot, real_isfinite = backend._dot, np.isfinite

    def dot(a, b):
        calls.append(f"dot {a.dtype} {a.size}")
        return real_dot(a, b)

    def isfinite(a, *args, **kwargs):
        if np.asarray(a).size > 1000:  # the optimizer's scalars are no bucket
            calls.append(f"isfinite {np.asarray(a).dtype} {np.asarray(a).size}")
        return real_isfinite(a, *args, **kwargs)

    monkeypatch.setattr(backend, "_dot", dot)
    monkeypatch.setattr(np, "isfinite", isfinite)
    param = Parameter("w", np.zeros(1 << 16, dtype=dtype))
    float16_params_step([param], wire)
    assert calls == []
    np.testing.assert_array_equal(param.value, np.full(1 << 16, -0.01, dtype=dtype))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wire", ["float16", "bfloat16"])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_each_kind_of_non_finite_wire_value_is_refused(wire, bad):
    if wire == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    grad = np.array([1.0, bad, -2.0])
    with pytest.raises(SyncError, match=r"bucket 0 \(w\).*not finite"):
        with np.errstate(invalid="ignore"):
            one_step(wire, grad, overlap=False)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("wire, largest", [("float16", 65504.0), ("bfloat16", 3.3e38)])
def test_the_largest_finite_wire_values_pass(wire, largest):
    if wire == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    value = one_step(wire, np.array([largest, -largest, 0.0]), overlap=False).value
    assert np.all(np.isfinite(value))
    assert value[0] < -0.005 * largest and value[1] > 0.005 * largest
