"""The piece plan (a pure function of sizes) and the pump that puts the pieces on the wire."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi import sync as sync_module
from distconv.sync.mpi.buckets import build_buckets
from distconv.sync.mpi.pieces import (
    LAST_PIECE_BYTES,
    WirePlan,
    covering,
    piece_sizes,
    plan_pieces,
    shrink_tail,
)
from tests.mpi.common import RecordingComm

KIB, MIB = 1 << 10, 1 << 20


def lengths(plan: list[list[slice]]) -> list[list[int]]:
    return [[s.stop - s.start for s in pieces] for pieces in plan]


def test_the_first_piece_is_small_then_they_double_up_to_the_largest():
    # one 4 MiB float32 bucket, 1 MiB first: 1 MiB, then 2 MiB, and the last 1 MiB (under half
    # of the 4 MiB piece that would follow) joins the one before it
    assert lengths(plan_pieces([(MIB, 4)], MIB, 4 * MIB)) == [[MIB // 4, 3 * MIB // 4]]
    # growth runs across the buckets of the layout, not afresh in each
    plan = plan_pieces([(3 * MIB // 4, 4), (4 * MIB, 4)], 256 * KIB, 4 * MIB)
    assert lengths(plan) == [[64 * KIB, 128 * KIB, 256 * KIB, 320 * KIB], [MIB] * 4]
    # (the 2 elements left after the first 8 are under half the next piece: they join it)
    # a bucket reduced by other means (a 16-bit wire) has no pieces and takes no turn
    plan = plan_pieces([(10, 2), (0, 2), (100, 8)], 16, 16)
    assert lengths(plan) == [[10], [], [2] * 50]


def test_uniform_pieces_when_first_equals_largest():
    assert lengths(plan_pieces([(1000, 8)], 800, 800)) == [[100] * 10]
    # a piece is never empty, even when one element is larger than the byte sizes
    assert lengths(plan_pieces([(3, 8)], 1, 1)) == [[1, 1, 1]]


@settings(max_examples=200, deadline=None)
@given(
    buckets=st.lists(
        st.tuples(st.integers(0, 5000), st.sampled_from([2, 4, 8])), min_size=1, max_size=6
    ),
    first=st.integers(1, 4096),
    largest=st.integers(1, 16384),
)
def test_the_plan_tiles_every_bucket_and_ignores_the_buckets_after(buckets, first, largest):
    plan = plan_pieces(buckets, first, largest)
    # a bucket's pieces depend on the buckets before it, never on those after it
    assert plan[:-1] == plan_pieces(buckets[:-1], first, largest)
    assert len(plan) == len(buckets)
    for (elements, itemsize), pieces in zip(buckets, plan):
        if elements == 0:
            assert pieces == []
            continue
        assert [s.start for s in pieces] == [0, *(s.stop for s in pieces[:-1])]
        assert (pieces[-1].stop if pieces else 0) == elements
        for s in pieces:
            assert s.stop > s.start
            # at most the largest size, or one and a half of it where a sliver joined
            assert (s.stop - s.start) * itemsize <= max(itemsize, largest + largest // 2)
    # the n-th piece of the layout (but a bucket's last, which takes what is left) holds
    # min(largest, first * 2**n) bytes, at least one element
    n = 0
    for (_, itemsize), pieces in zip(buckets, plan):
        for s in pieces[:-1]:
            assert s.stop - s.start == max(1, min(largest, first << n) // itemsize)
            n += 1
        n += bool(pieces)


def test_the_layouts_last_pieces_shrink_to_the_last_size():
    """The allreduce that starts after the last gradient is the one backward cannot hide: the
    end of the layout's last bucket is cut into pieces that halve down to ``last_bytes``."""
    plan = plan_pieces([(MIB // 4, 4), (MIB // 4, 4)], MIB, MIB, 256 * KIB)
    # the first bucket keeps its piece; the second ends 256 KiB, 512 KiB, the 256 KiB left
    # over (under half of the 1 MiB that would come next) joining the 512 KiB
    assert lengths(plan) == [[MIB // 4], [3 * MIB // 16, MIB // 16]]
    plan = plan_pieces([(MIB, 4), (0, 4)], MIB, MIB, 64 * KIB)  # an empty bucket last
    kib = [[n * 4 // KIB for n in pieces] for pieces in lengths(plan)]
    assert kib == [[1024, 1024, 1024, 576, 256, 128, 64], []]
    # at or over the full size, nothing changes
    for last in (MIB, 4 * MIB, None):
        assert plan_pieces([(MIB, 4)], MIB, MIB, last) == plan_pieces([(MIB, 4)], MIB, MIB)


@settings(max_examples=100, deadline=None)
@given(
    elements=st.integers(1, 5000),
    last=st.integers(1, 300),
    largest=st.integers(1, 2000),
)
def test_shrink_tail_tiles_the_piece_and_ends_with_the_last_size(elements, last, largest):
    cut = shrink_tail(slice(7, 7 + elements), last, largest)
    assert [s.start for s in cut] == [7, *(s.stop for s in cut[:-1])] and cut[
        -1
    ].stop == 7 + elements
    sizes = [s.stop - s.start for s in cut]
    assert all(n > 0 for n in sizes)
    if elements > last:  # the final piece is the last size (a sliver may join a lone one)
        assert sizes[-1] == last if len(sizes) > 1 else sizes[-1] < 2 * last
    # from the end, each piece twice the one after it up to the largest; the front one holds
    # what is left: at least half the size it would have, or under that, joined to the next
    top = max(last, largest)
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        want = min(top, 2 * b)
        if i > 0:
            assert a == want
        else:
            assert want // 2 <= a <= want or want < a < want + min(top, 2 * want) // 2


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 50), min_size=1, max_size=12),
    step=st.integers(1, 40),
)
def test_covering_names_every_piece_a_block_overlaps(sizes, step):
    total = sum(sizes)
    pieces = [slice(a, min(a + step, total)) for a in range(0, total, step)]
    got = covering(sizes, pieces)
    start = 0
    for size, covered in zip(sizes, got):
        expected = [k for k, s in enumerate(pieces) if s.start < start + size and start < s.stop]
        assert list(covered) == expected
        start += size


def params(*sizes: int, dtype=np.float32) -> list[Parameter]:
    return [Parameter(f"p{i}", np.zeros(n, dtype)) for i, n in enumerate(sizes)]


def test_a_piece_waits_for_every_gradient_it_covers():
    # 3 float32 gradients of 400 bytes in one bucket: pieces of 256 bytes, then 512; the 432
    # bytes left are under half of the 1024 that would follow, so they join the second
    buckets = build_buckets(params(100, 100, 100), 4096, None, 1, False, 256, 1024)
    plan = WirePlan(buckets)
    assert [s.stop - s.start for s in buckets[0].pieces] == [64, 236]
    assert [plan.slots[f"p{i}"].covered for i in range(3)] == [(0, 1), (1,), (1,)]
    assert plan.need == [1, 3] and plan.at_pack == [()]


def test_pieces_are_numbered_across_the_layout_in_every_streaming_bucket():
    """Two buckets of two pieces each: the second bucket's gradients arrive at pieces 2 and 3
    of the layout, not at its own 0 and 1 (which would start the first bucket's pieces)."""
    buckets = build_buckets(params(100, 100, 100, 100), 800, None, 1, False, 256, 512)
    plan = WirePlan(buckets)
    assert [len(b.pieces) for b in buckets] == [2, 2] and all(b.streams for b in buckets)
    assert [s.stop - s.start for b in buckets for s in b.pieces] == [64, 136, 128, 72]
    assert [plan.slots[f"p{i}"].covered for i in range(4)] == [(0, 1), (1,), (2,), (2, 3)]
    assert plan.need == [1, 2, 2, 1] and plan.at_pack == [(), ()]
    # each function reads its own piece of its own bucket's wire buffer
    owners = [buckets[0], buckets[0], buckets[1], buckets[1]]
    assert all(np.shares_memory(f(), b.target) for f, b in zip(plan.pieces, owners))
    assert [f().size for f in plan.pieces] == [64, 136, 128, 72]


def test_a_bucket_of_one_piece_goes_once_complete():
    """No count per gradient: the bucket's own count says when its one piece is ready."""
    buckets = build_buckets(params(100, 100), 4096, None, 1)
    plan = WirePlan(buckets)
    assert buckets[0].streams and len(buckets[0].pieces) == 1
    assert [plan.slots[n].covered for n in ("p0", "p1")] == [(), ()]
    assert plan.need == [1] and plan.at_pack == [(0,)]


def test_a_cast_bucket_goes_whole_once_packed():
    buckets = build_buckets(params(100, 100, dtype=np.float64), 4096, np.dtype("float32"), 1)
    plan = WirePlan(buckets)
    assert not buckets[0].streams and buckets[0].casts
    assert [plan.slots[n].covered for n in ("p0", "p1")] == [(), ()]
    assert plan.need == [1] and plan.at_pack == [(0,)]


class SizesComm(SingleRankComm):
    """One rank, noting the bytes of every gradient allreduce in the order they start (not the
    step's used-parameter flags, one byte each)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def Iallreduce(self, send, recv, op=None):  # noqa: N802 - mpi4py's spelling
        if recv.dtype != np.uint8:
            self.sizes.append(recv.nbytes)
        return super().Iallreduce(send, recv, op)


def test_pieces_go_on_the_wire_in_order_as_soon_as_their_gradients_are_in():
    """One rank (SingleRankComm completes every request at once): each on_gradient starts the
    pieces whose gradients have all arrived, in layout order, and no other."""
    comm = SizesComm()
    ps = params(100, 100, 100, 100)  # laid out and fired in reverse: p3 p2 p1 p0, one bucket
    sync = MPISync(
        create_optimizer("sgd"), comm=comm, overlap=False, first_piece_bytes=400, piece_bytes=1600
    )
    sync.setup(ps, {})
    try:
        # pieces of 400 and 800 bytes; the last 400 bytes (under half of 1600) join the second:
        # the first piece is p3's gradient, the second the rest
        assert [s.stop - s.start for s in sync.buckets[0].pieces] == [100, 300]
        sync.start_step(1)
        started = []
        for p in reversed(ps):
            sync.on_gradient(p)
            started.append(list(comm.sizes))
        assert started == [[400], [400], [400], [400, 1200]]
        sync.finish_step()
        assert comm.sizes == [400, 1200]
    finally:
        sync.close()


def piece_sync(comm, **options) -> tuple[MPISync, list[Parameter]]:
    """Two float32 gradients of 400 bytes in one bucket of two 400-byte pieces, set up."""
    ps = params(100, 100)
    options = {"overlap": False, **options}
    sync = MPISync(
        create_optimizer("sgd"), comm=comm, first_piece_bytes=400, piece_bytes=400, **options
    )
    sync.setup(ps, {})
    return sync, ps


def test_the_step_check_completes_before_a_piece_goes_ahead_of_its_bucket():
    """A piece ready before any bucket is complete still waits for the step check: a rank
    that disagrees must be named before any gradient collective, not hang in one."""
    comm = RecordingComm(sizes=True)
    sync, ps = piece_sync(comm)
    del comm.log[:]  # setup's: its meeting
    try:
        sync.start_step(1)
        assert comm.log == ["Iallgather"]
        sync.on_gradient(ps[1])  # the first piece; its bucket still waits for ps[0]
        assert sync.buckets[0].pending == 1
        assert comm.log == ["Iallgather", "check complete", "Iallreduce 400"]
        sync.on_gradient(ps[0])
        sync.finish_step()
        pieces = ["Iallreduce 400", "Iallreduce 400"]
        assert comm.log == ["Iallgather", "check complete", *pieces, "used flags"]
    finally:
        sync.close()


def test_without_streaming_every_piece_waits_for_its_bucket():
    comm = SizesComm()
    sync, ps = piece_sync(comm, stream=False)
    try:
        sync.start_step(1)
        sync.on_gradient(ps[1])  # its piece is in, but not the whole bucket
        assert comm.sizes == []
        sync.on_gradient(ps[0])
        assert comm.sizes == [400, 400]  # both as soon as the bucket is complete
        sync.finish_step()
        assert comm.sizes == [400, 400]
    finally:
        sync.close()


def test_pieces_under_a_gradient_that_never_fires_go_at_finish_step():
    comm = SizesComm()
    ps = params(100, 100)
    sync = MPISync(
        create_optimizer("sgd"), comm=comm, overlap=False, first_piece_bytes=400, piece_bytes=400
    )
    sync.setup(ps, {})
    try:
        sync.start_step(1)
        sync.on_gradient(ps[1])  # the first piece; ps[0]'s piece waits
        assert comm.sizes == [400]
        sync.finish_step()
        assert comm.sizes == [400, 400]
    finally:
        sync.close()


@pytest.mark.parametrize("name", ["first_piece_bytes", "piece_bytes", "last_piece_bytes"])
def test_piece_sizes_must_be_positive_integers(name):
    with pytest.raises(ValueError, match=f"^{name} must be a positive integer, got 0$"):
        MPISync(create_optimizer("sgd"), comm=SingleRankComm(), **{name: 0})


def test_the_firing_order_cannot_change_in_place():
    """start_step re-lays the buckets when the order is another object: an order changed in
    place would keep the old layout, so the sync keeps one that cannot be."""
    ps = params(100, 100)
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), overlap=False)
    sync.setup(ps, {})
    try:
        names = ["p0", "p1"]
        sync.set_firing_order(names)
        names.reverse()  # the caller's list is not the sync's
        assert sync.firing_order == ("p0", "p1")
        assert [p.name for p in sync.buckets[0].params] == ["p0", "p1"]
        with pytest.raises(AttributeError):
            sync.firing_order.reverse()
    finally:
        sync.close()


class SignallingComm(SizesComm):
    """:class:`SizesComm` that also sets an event at each gradient allreduce (from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()

    def Iallreduce(self, send, recv, op=None):  # noqa: N802 - mpi4py's spelling
        request = super().Iallreduce(send, recv, op)
        self.started.set()
        return request


def test_the_thread_gets_each_piece_as_soon_as_its_gradients_are_in():
    """With a communication thread, a bucket's first piece is reduced while its bucket still
    waits for a gradient, and the last allreduce of the step is the small last piece."""
    comm = SignallingComm()
    sync, ps = piece_sync(comm, overlap=True, last_piece_bytes=200)
    assert sync.overlap
    try:
        assert [s.stop - s.start for s in sync.buckets[0].pieces] == [100, 50, 50]
        sync.start_step(1)
        sync.on_gradient(ps[1])  # the first piece's gradient; ps[0] is still to come
        assert comm.started.wait(timeout=60)  # handed to the thread before the bucket completes
        assert sync.buckets[0].pending == 1
        sync.on_gradient(ps[0])
        sync.finish_step()
        assert comm.sizes == [400, 200, 200]
    finally:
        sync.close()


@pytest.mark.parametrize("overlap", [False, True])
def test_a_bucket_is_cut_into_pieces_by_default_only_with_the_thread(overlap):
    """Only the thread hides the pieces before the last behind backward; without it each extra
    call costs a meeting of the ranks, so a bucket goes in one call there, as DDP's do."""
    ps = params(MIB // 4, MIB // 4)  # 2 MiB of float32 gradients in one bucket
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), overlap=overlap)
    sync.setup(ps, {})
    try:
        got = [(s.stop - s.start) * 4 for s in sync.buckets[0].pieces]
        small = [MIB, 640 * KIB, 256 * KIB, LAST_PIECE_BYTES]
        assert got == (small if overlap else [2 * MIB])
        whole = 4 * MIB  # the default bucket size
        assert sync.piece_sizes == ((MIB, MIB, LAST_PIECE_BYTES) if overlap else (whole,) * 3)
    finally:
        sync.close()


def test_pieces_asked_for_are_kept_without_the_thread():
    ps = params(MIB // 4, MIB // 4)
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), overlap=False, piece_bytes=MIB)
    sync.setup(ps, {})
    try:
        assert [(s.stop - s.start) * 4 for s in sync.buckets[0].pieces] == [MIB, MIB]
    finally:
        sync.close()


def test_a_gradient_larger_than_a_bucket_goes_in_one_call_without_the_thread():
    """It gets a bucket of its own (as in DDP), and that bucket one call too: cut into pieces of
    ``bucket_bytes`` it would go in more calls than the 1 MiB pieces of before."""
    ps = params(MIB, 10)  # a 4 MiB gradient beside a small one, 256 KiB buckets
    sync = MPISync(
        create_optimizer("sgd"), comm=SingleRankComm(), overlap=False, bucket_bytes=256 * KIB
    )
    sync.setup(ps, {})
    try:
        assert [len(b.pieces) for b in sync.buckets] == [1, 1]
        assert sync.piece_sizes == (4 * MIB,) * 3
    finally:
        sync.close()


@pytest.mark.parametrize(
    ("dtype", "wire", "calls"),
    [(np.float32, "float64", [1, 1]), (np.float16, "float32", [1, 1]), (np.float32, None, [1, 1])],
)
def test_a_bucket_cast_to_a_wider_wire_goes_in_one_call_without_the_thread(dtype, wire, calls):
    """The full piece is sized in gradient bytes (``bucket_bytes``), the pieces are cut in wire
    bytes: a float64 wire over float32 gradients (float32 over float16) went in two calls a
    bucket where the gradients' own dtype goes in one."""
    ps = params(300, 200, 250, dtype=dtype)  # two buckets: 500 and 250 elements
    size = np.dtype(dtype).itemsize * 500
    comm = SingleRankComm()
    sync = MPISync(create_optimizer("sgd"), comm=comm, bucket_bytes=size, grad_dtype=wire)
    sync.setup(ps, {})
    try:
        assert [len(b.params) for b in sync.buckets] == [2, 1]
        assert [len(b.pieces) for b in sync.buckets] == calls
    finally:
        sync.close()


@pytest.mark.parametrize(("requested", "thread"), [(None, True), (True, False)])
def test_the_pieces_follow_the_thread_decided_not_the_one_requested(monkeypatch, requested, thread):
    """overlap=None may turn the thread on (a GPU, spare cores), and overlap=True may be refused
    (MPI below THREAD_SERIALIZED): the plan follows what every rank decided."""
    monkeypatch.setattr(sync_module, "thread_poll_seconds", lambda *a: 0.0 if thread else None)
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), overlap=requested)
    sync.setup(params(MIB // 4, MIB // 4), {})
    try:
        assert sync.overlap is thread
        assert sync.piece_sizes == ((MIB, MIB, LAST_PIECE_BYTES) if thread else (4 * MIB,) * 3)
    finally:
        sync.close()


@pytest.mark.parametrize(
    ("asked", "thread", "sizes"),
    [
        ((None, None, None), False, (3 * MIB, 3 * MIB, 3 * MIB)),
        ((None, None, None), True, (MIB, MIB, LAST_PIECE_BYTES)),
        ((None, 512 * KIB, None), False, (512 * KIB, 512 * KIB, 512 * KIB)),
        ((256 * KIB, None, None), False, (256 * KIB, 3 * MIB, 3 * MIB)),
        ((None, None, 64 * KIB), False, (3 * MIB, 3 * MIB, 64 * KIB)),
        ((100, 200, 300), True, (100, 200, 300)),
    ],
)
def test_piece_sizes_not_given_follow_the_thread(asked, thread, sizes):
    assert piece_sizes(asked, thread, bucket_bytes=3 * MIB) == sizes


def test_without_the_thread_a_full_piece_holds_the_largest_gradient():
    assert piece_sizes((None, None, None), False, 3 * MIB, largest=5 * MIB) == (5 * MIB,) * 3
    assert piece_sizes((None, None, None), True, 3 * MIB, largest=5 * MIB)[1] == MIB
    assert piece_sizes((None, 2 * MIB, None), False, 3 * MIB, largest=5 * MIB)[1] == 2 * MIB
