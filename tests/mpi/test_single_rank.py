"""World size 1: MPISync's own code path (buckets, views, checks) in one process, without MPI."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from distconv import backend
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.layout import taken_once
from tests.mpi.common import RecordingComm, fake_cupy, small_lenet, train, weights


@pytest.fixture
def no_mpi4py(monkeypatch):
    """Make ``import mpi4py`` fail, as on a machine without it."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)


def run(sync) -> dict[str, np.ndarray]:
    net = small_lenet(seed=0)
    sync.setup(net.parameters(), {})
    try:
        train(net, sync)
    finally:
        sync.close()
    return weights(net)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize(
    "bucket_bytes, overlap, piece_bytes",
    [
        (1 << 22, False, 1 << 20),
        (300, False, 1 << 20),
        (300, True, 1 << 20),
        (1 << 22, False, 64),
        (1 << 22, True, 64),  # the thread handed many pieces, one by one
    ],
)
def test_one_rank_without_mpi4py_equals_local_sync_bitwise(
    no_mpi4py, optimizer, bucket_bytes, overlap, piece_bytes
):
    expected = run(LocalSync(create_optimizer(optimizer)))
    sync = MPISync(
        create_optimizer(optimizer),
        bucket_bytes=bucket_bytes,
        overlap=overlap,
        piece_bytes=piece_bytes,
    )
    assert isinstance(sync.comm, SingleRankComm) and sync.world_size == 1
    got = run(sync)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


@pytest.mark.parametrize("overlap", [False, True])
def test_gradients_are_views_into_the_bucket_buffers(no_mpi4py, overlap):
    """With the thread, the layers get the spare buffer, zero, while the thread zeroes the other."""
    net = small_lenet(seed=0)
    sync = MPISync(create_optimizer("sgd"), bucket_bytes=300, overlap=overlap)
    sync.setup(net.parameters(), {})
    for _ in range(3):
        train(net, sync)  # 4 steps each
        assert len(sync.buckets) > 3
        for bucket in sync.buckets:
            assert sum(p.size for p in bucket.params) == bucket.buffer.size
            assert (bucket.spare is not None) is overlap
            for p in bucket.params:
                assert np.shares_memory(p.grad, bucket.buffer)
                assert not p.grad.any()  # zero again after the step
    used = [b.buffer for b in sync.buckets]
    sync.start_step(1)
    for p in sync.params:
        sync.on_gradient(p)
    sync.finish_step()
    # with the thread the two buffers take turns; without it there is one
    assert all((b.buffer is not u) is overlap for b, u in zip(sync.buckets, used))
    sync.close()


def test_buckets_follow_the_first_pass_then_the_given_order(no_mpi4py):
    params = small_lenet(seed=0).parameters()
    sync = MPISync(create_optimizer("sgd"), bucket_bytes=300)
    sync.setup(params, {})
    assert [p.name for b in sync.buckets for p in b.params] == [p.name for p in params[::-1]]
    fired = [params[i] for i in np.random.default_rng(0).permutation(len(params))]
    for _ in range(2):
        sync.start_step(1)
        for p in fired:
            sync.on_gradient(p)
        sync.finish_step()
        # the first step ran on the first guess; from the second on, buckets follow the pass
    assert [p.name for b in sync.buckets for p in b.params] == [p.name for p in fired]
    sync.set_firing_order([p.name for p in params])
    assert [p.name for b in sync.buckets for p in b.params] == [p.name for p in params]
    sync.close()


def test_float16_wire_is_close_to_the_exact_result(no_mpi4py):
    exact = run(MPISync(create_optimizer("sgd")))
    half = run(MPISync(create_optimizer("sgd"), grad_dtype="float16"))
    error = max(float(np.abs(half[k] - exact[k]).max()) for k in exact)
    assert 0 < error < 1e-3


def test_bfloat16_wire_is_close_to_the_exact_result(no_mpi4py):
    pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    exact = run(MPISync(create_optimizer("sgd")))
    half = run(MPISync(create_optimizer("sgd"), grad_dtype="bfloat16"))
    error = max(float(np.abs(half[k] - exact[k]).max()) for k in exact)
    assert 0 < error < 1e-2


def test_state_dict_round_trip(no_mpi4py):
    sync = MPISync(create_optimizer("adam"))
    net = small_lenet(seed=0)
    sync.setup(net.parameters(), {})
    train(net, sync)
    state = {k: {b: np.array(v) for b, v in s.items()} for k, s in sync.state_dict().items()}
    sync.close()
    other = MPISync(create_optimizer("adam"))
    other.setup(small_lenet(seed=0).parameters(), {})
    other.load_state_dict(state)
    for name, buffers in state.items():
        for key, value in buffers.items():
            np.testing.assert_array_equal(other.state_dict()[name][key], value)
    assert int(other.state_dict()["fc2.weight"]["step"]) == 4
    other.close()


def test_bad_arguments_and_misuse_are_named(no_mpi4py):
    with pytest.raises(ValueError, match="grad_dtype must be one of"):
        MPISync(create_optimizer("sgd"), grad_dtype="int8")
    with pytest.raises(ValueError, match="bucket_bytes must be a positive integer"):
        MPISync(create_optimizer("sgd"), bucket_bytes=0)
    with pytest.raises(ValueError, match="piece_bytes must be a positive integer, got 1.5"):
        MPISync(create_optimizer("sgd"), piece_bytes=1.5)
    with pytest.raises(
        ValueError, match="poll_seconds must be a finite number >= 0 or None, got -1"
    ):
        MPISync(create_optimizer("sgd"), poll_seconds=-1)
    net = small_lenet(seed=0)
    sync = MPISync(create_optimizer("sgd"))
    with pytest.raises(SyncError, match="before setup"):
        sync.start_step(4)
    sync.setup(net.parameters(), {})
    p = net.parameters()[0]
    with pytest.raises(SyncError, match="outside a step"):
        sync.on_gradient(p)
    sync.start_step(4)
    sync.on_gradient(p)
    with pytest.raises(SyncError, match="fired twice"):
        sync.on_gradient(p)
    sync.abandon_step()  # as a script must where its step raised, before it closes
    sync.close()


def test_metrics_reduce_over_one_rank(no_mpi4py):
    sync = MPISync(create_optimizer("sgd"))
    sync.setup([Parameter("w", np.zeros(3))], {})
    assert sync.allreduce_sum([1.5, 2]) == [1.5, 2.0]
    sync.barrier()
    sync.all_equal({"a": 1})


def test_metrics_and_barriers_come_between_steps(no_mpi4py):
    """Before setup the ranks' parameters may still differ (and another rank, in setup, is
    at its job check, which a sum does not match but names); inside a step the ranks' exchange
    of where they are is the step's own (and with the communication thread the main thread
    makes no MPI call there); after a step that failed the ranks may differ. A meeting is
    refused there, naming why."""
    sync = MPISync(create_optimizer("sgd"), overlap=False)
    with pytest.raises(SyncError, match=r"summing 1 value after 0 steps: .* not in the job's st"):
        sync.allreduce_sum([1.0])
    sync.setup([Parameter("w", np.zeros(3))], {})
    sync.start_step(2)
    with pytest.raises(SyncError, match="summing 1 value after 0 steps: .* not in step 0"):
        sync.allreduce_sum([1.0])
    with pytest.raises(SyncError, match="at the barrier after 0 steps: .* not in step 0"):
        sync.barrier()
    sync.on_gradient(sync.params[0])  # the step's check completed: no longer what refuses
    with pytest.raises(SyncError, match="broadcasting rank 0's parameters after 0 steps: .* n"):
        sync.broadcast_parameters()
    with pytest.raises(SyncError, match=r"comparing the job \(setup's check\) after 0 steps: "):
        sync.all_equal({"a": 1})
    sync.finish_step()
    assert sync.allreduce_sum([1.0, 2.0]) == [1.0, 2.0]  # between steps: as before
    sync.barrier()
    sync.broadcast_parameters()
    sync.all_equal({"a": 1})
    sync.start_step(2)
    sync.on_gradient(sync.params[0])

    def failing_update(*args, **kwargs):
        raise ValueError("no update")

    sync.optimizer.update = failing_update  # the step fails in finish_step
    with pytest.raises(ValueError, match="no update"):
        sync.finish_step()
    with pytest.raises(SyncError, match=r"after 2 steps: .* not in step 1 \(no finish_step, or"):
        sync.barrier()
    sync.close()  # one rank: nobody to abort


@pytest.mark.gpu
def test_gpu_gradients_are_staged_through_the_host(no_mpi4py):
    from distconv import backend

    try:
        backend.set_device("gpu")
    except backend.BackendError as exc:
        pytest.skip(f"no GPU: {exc}")
    try:
        expected = run(LocalSync(create_optimizer("adam")))
        sync = MPISync(create_optimizer("adam"), bucket_bytes=300)
        got = run(sync)
        assert all(b.on_device for b in sync.buckets)
    finally:
        backend.set_device("cpu")
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-12)


def test_float16_on_the_wire_carries_averages_not_sums_that_overflow():
    """512 examples with gradient 200 each sum to 102400, past float16's 65504."""
    from distconv.optim import create_optimizer
    from distconv.parameter import Parameter
    from distconv.sync.mpi import MPISync

    for wire in (None, "float16"):
        p = Parameter("w", np.zeros(4, np.float32))
        sync = MPISync(create_optimizer("sgd", lr=0.1), grad_dtype=wire)
        sync.setup([p], {})
        sync.start_step(512)
        p.grad[...] = 200.0 * 512
        sync.on_gradient(p)
        sync.finish_step()
        sync.close()
        np.testing.assert_allclose(p.value, -20.0, rtol=1e-3, err_msg=str(wire))


@pytest.mark.parametrize("overlap", [False, True])
def test_float16_parameters_are_averaged_before_the_wire(no_mpi4py, overlap):
    """16-bit gradients are averaged in ``pack`` (float32 arithmetic), not by the optimizer:
    the sum of several ranks' sums would overflow float16, and Adam's folded ``s * s`` would
    underflow. The step equals LocalSync's (which scales first too) bitwise."""
    from distconv.parameter import Parameter

    rng = np.random.default_rng(0)
    start = (0.01 * rng.standard_normal(64)).astype(np.float16)
    grad = (768 * rng.uniform(0.5, 1.5, 64)).astype(np.float16)
    results = []
    for sync in (
        LocalSync(create_optimizer("adam", eps=1e-3)),
        MPISync(create_optimizer("adam", eps=1e-3), overlap=overlap),
    ):
        p = Parameter("w", start.copy())
        sync.setup([p], {})
        for _ in range(3):
            sync.start_step(768)
            p.grad[...] = grad
            if isinstance(sync, MPISync):
                bucket = sync.buckets[0]
                assert bucket.averages and bucket.grad_scale(768) == 1.0
            sync.on_gradient(p)
            sync.finish_step()
        sync.close()
        results.append(p.value.copy())
    np.testing.assert_array_equal(results[1], results[0])
    # three Adam steps of a positive gradient move each weight by about 3 * lr
    np.testing.assert_allclose(start.astype(np.float32) - results[1], 3e-3, rtol=0.02)


def test_the_trainer_reports_the_transports_traffic_on_metrics(no_mpi4py):
    """/metrics counts what the sync moved: bytes and the time finishing steps took."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from distconv.service import ServiceEndpoints
    from distconv.trainer import Trainer

    service = ServiceEndpoints(role="worker", rank=0)
    sync = MPISync(create_optimizer("sgd"), bucket_bytes=300)
    rng = np.random.default_rng(0)
    data = {"image": rng.random((32, 1, 8, 8), dtype=np.float32), "label": np.arange(32) % 4}
    try:
        Trainer(small_lenet(seed=0), sync, 8, monitor=service, progress=False).fit(data, epochs=1)
    finally:
        sync.close()
    text = generate_latest(service.registry)
    values = {
        s.name: s.value for f in text_string_to_metric_families(text.decode()) for s in f.samples
    }
    assert values["distconv_bytes_pushed_total"] == sync.wire_bytes > 0
    assert values["distconv_allreduce_seconds_count"] == 4  # one per step


def test_the_step_check_completes_before_the_first_gradient_collective(no_mpi4py):
    """start_step only posts the check; it is completed (and a mismatch named) before any
    gradient reduction could hang, not at once: the ranks meet once a step."""
    net = small_lenet(seed=0)
    comm = RecordingComm()
    sync = MPISync(create_optimizer("sgd"), comm=comm, bucket_bytes=300)
    sync.setup(net.parameters(), {})
    comm.log.clear()
    sync.start_step(4)
    assert comm.log == ["Iallgather"]
    first, *rest = sync.buckets[0].params
    for p in rest:  # the first bucket is not complete yet: nothing goes on the wire
        sync.on_gradient(p)
    assert comm.log == ["Iallgather"]
    sync.on_gradient(first)
    assert comm.log[:3] == ["Iallgather", "check complete", "Iallreduce"]
    for p in sync.params:
        if p.name not in {q.name for q in sync.buckets[0].params}:
            sync.on_gradient(p)
    sync.finish_step()
    assert comm.log.count("check complete") == 1
    sync.close()


class _CountingRequest:
    """A request that completes at its third ``Test``, or at once in ``Wait``."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def Test(self) -> bool:  # noqa: N802 - mpi4py's spelling
        self.calls.append("Test")
        return self.calls.count("Test") >= 3

    def Wait(self) -> None:  # noqa: N802
        self.calls.append("Wait")


def test_poll_sleeps_between_tests_or_waits_at_once():
    """A thread with a core of its own (``poll_seconds=0``) waits in MPI_Wait from the start;
    otherwise it tests between sleeps, and waits once the main thread hurries it."""
    import threading

    from distconv.sync.mpi.thread import poll

    gentle, spinning, hurried = _CountingRequest(), _CountingRequest(), _CountingRequest()
    poll(gentle, None, 1e-6)
    poll(spinning, None, 0.0)
    hurry = threading.Event()
    hurry.set()
    poll(hurried, hurry, 1e-6)
    assert gentle.calls == ["Test"] * 3
    assert spinning.calls == ["Wait"]
    assert hurried.calls == ["Test", "Wait"]


def test_a_pending_step_check_is_completed_never_overwritten(no_mpi4py):
    """start_step twice without finish_step completes the first check and then refuses,
    naming the cause; close() after an unfinished step completes its check too (and the last
    exchange: a rank alone leaves cleanly) before it refuses the step left open."""
    p = Parameter("w", np.zeros(4))
    comm = RecordingComm()
    sync = MPISync(create_optimizer("sgd"), comm=comm)
    sync.setup([p], {})
    comm.log.clear()
    sync.start_step(4)
    with pytest.raises(SyncError, match="start_step called while step 0 is unfinished"):
        sync.start_step(4)
    assert comm.log == ["Iallgather", "check complete"]
    sync.abandon_step()  # the step the refused start_step left open, as a script must
    sync.close()
    comm = RecordingComm()
    sync = MPISync(create_optimizer("sgd"), comm=comm)
    sync.setup([p], {})
    comm.log.clear()
    sync.start_step(4)  # and the caller leaves the step open
    with pytest.raises(SyncError, match=r"closed in the middle of step 0"):
        sync.close()  # completes the pending check, then the last exchange, then refuses
    assert comm.log == ["Iallgather", "check complete", "Iallgather closing", "check complete"]


def test_close_while_an_exception_propagates_leaves_the_check_to_the_abort_path(no_mpi4py):
    comm = RecordingComm()
    sync = MPISync(create_optimizer("sgd"), comm=comm)
    sync.setup([Parameter("w", np.zeros(4))], {})
    comm.log.clear()
    sync.start_step(4)
    try:
        raise RuntimeError("a layer failed")
    except RuntimeError:
        sync.close()  # world size 1: nothing to abort, and no wait either
    assert comm.log == ["Iallgather"]


@pytest.mark.timeout(30)
def test_a_sleeping_poll_wakes_when_hurried():
    """The sleep between tests is a wait on ``hurry``: being told to hurry ends it at once
    (a 10-minute sleep would outlast the test's timeout)."""
    import threading

    from distconv.sync.mpi.thread import poll

    request, hurry = _CountingRequest(), threading.Event()
    request.Test = lambda: request.calls.append("Test") and False  # never completes by testing
    threading.Timer(0.05, hurry.set).start()
    poll(request, hurry, 600.0)
    assert request.calls == ["Test", "Wait"]


@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf"), True, "0.1"])
def test_poll_seconds_must_be_a_finite_number(no_mpi4py, bad):
    with pytest.raises(ValueError, match=f"poll_seconds must be a finite number >= 0.*{bad!r}"):
        MPISync(create_optimizer("sgd"), poll_seconds=bad)


def test_a_broadcast_hands_back_the_shape_it_was_given(monkeypatch):
    """Adam's step count is 0-d: the host buffer of a broadcast was 1-d, which numpy assigns
    into 0-d but cupy refuses, so a GPU job of several ranks failed in setup."""
    from distconv.sync.mpi import comm as comm_module

    given = []
    monkeypatch.setattr(comm_module, "copy_into", lambda target, host: given.append(host.shape))
    for array in (np.zeros((), np.int64), np.zeros((2, 3)), np.zeros((3, 2)).T):
        comm_module.bcast_in_place(SingleRankComm(), array)
        assert given[-1] == array.shape


def test_parameters_given_as_a_generator_are_set_up_as_a_list_is(no_mpi4py):
    """setup takes any iterable of parameters (the base setup lists them, as LocalSync's
    does): MPISync read a generator for the job check's device first, so its setup took no
    parameter, and the first gradient was refused as not given to setup."""
    w = Parameter("w", np.ones(3))
    sync = MPISync(create_optimizer("sgd"))
    try:
        sync.setup(p for p in [w])
        assert sync.params == [w]
        sync.start_step(1)
        w.grad += 1.0
        sync(w)
        sync.finish_step()
    finally:
        sync.close()
    assert (w.value < 1.0).all()


class _OldSequence:
    """A container iterable through ``__getitem__`` alone (the old sequence protocol), which
    ``list`` and the base setup take, but which is no ``collections.abc.Iterable``."""

    def __init__(self, items: list[Parameter]) -> None:
        self.items = items

    def __getitem__(self, index: int) -> Parameter:
        return self.items[index]


def test_a_container_iterable_through_getitem_alone_is_listed_on_its_device(monkeypatch):
    """The job check's ``sync.device`` of GPU parameters given in an old-style sequence said
    "cpu" (taken as no iterable), so a GPU rank and a CPU rank passed the job check."""
    cupy = fake_cupy()
    monkeypatch.setattr(backend, "_cupy", cupy)  # the parameter's gradient is made with it
    w = Parameter("w", cupy.asarray(np.ones(3)))
    assert taken_once(_OldSequence([w])) == ([w], "gpu")


class _Unsayable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_an_errors_text_told_to_the_other_ranks_is_made_whatever_its_str_does():
    """Setup tells the others its error's text (before the job check, or before the
    broadcast); made before the exchange, a ``__str__`` that raised, or a text UTF-8 cannot
    encode (the broadcast's exchange sends it encoded), left them waiting in it."""
    from distconv.sync.mpi.telling import error_text

    assert error_text(ValueError("bad")) == "ValueError: bad"
    assert error_text(_Unsayable()) == "_Unsayable (its text could not be made)"
    assert error_text(ValueError("\udc80")).encode() == b"ValueError: \\udc80"
