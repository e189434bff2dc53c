"""The pump's order of hand-overs, the thread after a failure, 16-bit buckets among streaming
ones, and where the small last piece applies (one rank, no ``mpiexec``)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync
from distconv.sync.mpi.buckets import build_buckets
from distconv.sync.mpi.pieces import PiecePump, WirePlan
from tests.mpi.common import RecordingComm

KIB, MIB = 1 << 10, 1 << 20


def params(*sizes: int, dtype=np.float32) -> list[Parameter]:
    return [Parameter(f"p{i}", np.zeros(n, dtype)) for i, n in enumerate(sizes)]


def lengths(buckets) -> list[list[int]]:
    return [[s.stop - s.start for s in b.pieces] for b in buckets]


# -- the pump ---------------------------------------------------------------------------------
def test_the_pump_hands_over_each_piece_once_everything_under_it_and_before_it_is_in():
    """With ``hand_off`` (a thread's queue), after each arrival exactly the pieces whose
    arrivals are all in, and all of whose predecessors are, have been handed over, in order."""
    handed: list[int] = []
    firsts: list[int] = []
    pump = PiecePump(
        None, None, None, [lambda: None] * 5, [1, 2, 1, 1, 3],
        lambda: firsts.append(len(handed)), handed.append,
    )  # fmt: skip
    steps = [
        ([1], []),  # piece 1 waits for another arrival, piece 0 for its own
        ([0], [0]),
        ([2], [0]),  # piece 2 is ready, but piece 1 is not: layout order holds it back
        ([1, 4], [0, 1, 2]),
        ([3], [0, 1, 2, 3]),
        ([4], [0, 1, 2, 3]),
        ([4], [0, 1, 2, 3, 4]),
    ]
    for covered, expected in steps:
        pump.arrive(covered)
        assert handed == expected, covered
    assert firsts == [0]  # once, before the first hand-over
    pump.reset()  # a new step: nothing has arrived
    pump.arrive([0, 1])
    assert handed[5:] == [0]
    pump.finish()  # what never arrived goes as it is
    assert handed[5:] == [0, 1, 2, 3, 4] and firsts == [0, 5]


def test_without_a_thread_the_pump_starts_one_ready_piece_at_a_time_in_order():
    comm = RecordingComm(sizes=True)
    buffers = [np.zeros(n, np.float32) for n in (10, 20, 30)]
    pump = PiecePump(comm, None, None, [lambda b=b: b for b in buffers], [2, 1, 1], lambda: None)
    after = []
    for covered in ([1], [2], [0], [0]):
        pump.arrive(covered)
        after.append(list(comm.log))
    # SingleRankComm's requests are done at once: each test moves on to the next ready piece
    assert after == [[], [], [], ["Iallreduce 40", "Iallreduce 80", "Iallreduce 120"]]


# -- the communication thread after a failure ---------------------------------------------------
class FailingComm(RecordingComm):
    """One rank whose first gradient allreduce raises; every collective is logged."""

    def Iallreduce(self, send, recv, op=None):  # noqa: N802 - mpi4py's spelling
        request = super().Iallreduce(send, recv, op)
        if self.log.count("Iallreduce") == 1:
            raise RuntimeError("link to rank 1 lost")
        return request


@pytest.mark.timeout(60)
def test_after_a_failure_the_thread_issues_no_collective_and_finish_step_names_it():
    """2 buckets x 2 pieces on the thread, the first allreduce raising: no rank may go on with
    the next bucket's collectives (the others' sequence no longer matches), every bucket is
    marked failed with the first error, and finish_step raises it, without hanging."""
    comm = FailingComm()
    ps = params(100, 100, 100, 100)
    sync = MPISync(
        create_optimizer("sgd"), comm=comm, overlap=True, bucket_bytes=800,
        first_piece_bytes=256, piece_bytes=512,
    )  # fmt: skip
    sync.setup(ps, {})
    try:
        assert sync.overlap and lengths(sync.buckets) == [[64, 136], [128, 72]]
        sync.start_step(1)
        for p in reversed(ps):
            sync.on_gradient(p)
        with pytest.raises(SyncError, match="bucket 0 failed on the communication thread: link to"):
            sync.finish_step()
    finally:
        sync.close()  # lets the thread finish what was queued
    assert comm.log.count("Iallreduce") == 1
    # no collective at all after the failure but, maybe, the main thread's flags, which
    # finish_step posts before it learns of it (close skips its last exchange: the ranks'
    # sequences differ now)
    after = comm.log[comm.log.index("Iallreduce") + 1 :]
    assert after in ([], ["used flags"])
    assert all(isinstance(b.error, RuntimeError) for b in sync.buckets)
    assert sync.buckets[1].error is sync.buckets[0].error


# -- 16-bit buckets among streaming ones ------------------------------------------------------
class StartedComm(RecordingComm):
    """Logs the hand reduction too, and sets an event at the first gradient allreduce."""

    def __init__(self) -> None:
        super().__init__(sizes=True)
        self.started = threading.Event()

    def Iallreduce(self, send, recv, op=None):  # noqa: N802
        request = super().Iallreduce(send, recv, op)
        self.started.set()
        return request

    def Ialltoall(self, send, recv):  # noqa: N802
        self.log.append("Ialltoall")
        return super().Ialltoall(send, recv)


def test_a_16bit_bucket_goes_whole_at_its_place_and_the_others_still_stream():
    """The thread with a float16 bucket between float32 ones: the float32 pieces go as their
    gradients arrive, the float16 bucket as one item in layout order."""
    comm = StartedComm()
    ps = [*params(100), Parameter("h", np.zeros(100, np.float16)), *params(100, 100)[::-1]]
    ps[2].name, ps[3].name = "p2", "p3"
    sync = MPISync(
        create_optimizer("sgd"), comm=comm, overlap=True, first_piece_bytes=400, piece_bytes=400
    )
    sync.setup(ps, {})
    try:  # laid out in reverse: p3 p2 | h | p0
        assert [[p.name for p in b.params] for b in sync.buckets] == [["p3", "p2"], ["h"], ["p0"]]
        assert lengths(sync.buckets) == [[100, 100], [], [100]]
        for p in ps:
            p.grad[...] = 1.0
        sync.start_step(1)
        sync.on_gradient(ps[3])
        assert comm.started.wait(timeout=60)  # before the bucket is complete: it streams
        assert sync.buckets[0].pending == 1
        for p in ps[2::-1]:
            sync.on_gradient(p)
        sync.finish_step()
        wire = [
            e for e in comm.log if e.startswith(("Iallreduce", "Ialltoall")) or e == "Iallgather"
        ]
        # after setup's meeting and the step's check: the pieces in layout order
        assert wire[:2] == ["Iallgather"] * 2
        assert wire[2:] == ["Iallreduce 400"] * 2 + ["Ialltoall", "Iallgather", "Iallreduce 400"]
        for p in ps:  # one example: the update is -lr * the gradient, 16-bit buckets included
            np.testing.assert_allclose(p.value, -sync.optimizer.lr, rtol=1e-3)
    finally:
        sync.close()


def test_the_plan_gives_a_16bit_bucket_one_whole_item_only_with_the_thread():
    ps = [*params(100), Parameter("h", np.zeros(100, np.float16))]
    buckets = build_buckets(ps, 4096, None, 1)
    assert [b.compressed for b in buckets] == [False, True]
    plan = WirePlan(buckets, whole=True)
    assert plan.owners == [(buckets[0], 0), (buckets[1], None)]
    assert plan.need == [1, 1] and plan.at_pack == [(0,), (1,)]
    assert WirePlan(buckets).owners == [(buckets[0], 0)]


# -- where the small last piece applies -------------------------------------------------------
def test_the_last_piece_is_cut_only_where_the_last_bucket_streams():
    """A bucket that goes whole once complete (cast, 16-bit, ``stream=False``) gets no cut: it
    would only add calls. Decided from configuration and sizes alone."""
    f32 = params(256, 256)  # 2 KiB, one bucket of one piece; the last 256 bytes
    assert lengths(build_buckets(f32, 4096, None, 1, False, 2048, 2048, 256)) == [[320, 128, 64]]
    assert lengths(build_buckets(f32, 4096, None, 1, False, 2048, 2048, 256, False)) == [[512]]
    f64 = params(128, 128, dtype=np.float64)  # cast to float32 on the wire
    cast = build_buckets(f64, 4096, np.dtype("float32"), 1, False, 2048, 2048, 256)
    assert lengths(cast) == [[256]]
    # a 16-bit bucket last: the float32 bucket before it keeps its whole piece
    mixed = [Parameter("h", np.zeros(100, np.float16)), *params(256, 256)[::-1]]
    assert lengths(build_buckets(mixed[::-1], 4096, None, 1, False, 2048, 2048, 256)) == [
        [512],
        [],
    ]


@pytest.mark.parametrize("options", [dict(stream=False), dict(grad_dtype="float16")])
def test_the_thread_gets_no_small_last_piece_where_nothing_streams(options):
    ps = params(MIB // 4, MIB // 4)  # 2 MiB of float32 gradients in one bucket
    sync = MPISync(create_optimizer("sgd"), comm=RecordingComm(), overlap=True, **options)
    sync.setup(ps, {})
    try:
        expected = [] if "grad_dtype" in options else [MIB // 4] * 2
        assert lengths(sync.buckets) == [expected]
    finally:
        sync.close()
