"""reduce_all without the communication thread: a KeyboardInterrupt raised as a wait returns (a
Ctrl-C while this rank waited for a slower one), in the flags' Wait or a 16-bit bucket's
reduction by hand, is kept until the step's collectives are in, then told (``failed_alone``)
and raised, as an unpack's is; one kept from the last pieces' wait (``alone``) goes the same
way. Before, it left at once, with later collectives unmade and nothing told."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi.updates import reduce_all, to_the_end
from distconv.sync.mpi.used import FAILED, UsedParams

pytestmark = pytest.mark.timeout(30)


class Request:
    """A completed request whose first Wait raises ``interrupt`` once it has returned."""

    def __init__(self, interrupt: BaseException | None = None) -> None:
        self.interrupt, self.waits = interrupt, 0

    def Wait(self) -> None:  # noqa: N802 - mpi4py's spelling
        self.waits += 1
        if self.waits == 1 and self.interrupt is not None:
            raise self.interrupt


class FlagsComm:
    """The flags' communicator: the other rank's flags are ``theirs``; the exchange's request
    raises ``interrupt`` as its first Wait returns."""

    def __init__(self, theirs: int = 1, interrupt: BaseException | None = None) -> None:
        self.theirs, self.request = theirs, Request(interrupt)

    def Iallreduce(self, local: np.ndarray, anywhere: np.ndarray, op: Any) -> Request:  # noqa: N802
        np.maximum(local, self.theirs, out=anywhere)
        return self.request


class HandBucket:
    """A 16-bit bucket, reduced by hand in two requests (the first raising ``interrupt`` as its
    Wait returns), then unpacked."""

    def __init__(self, interrupt: BaseException | None = None) -> None:
        self.pieces, self.compressed, self.unpacked = [], True, False
        self.requests = [Request(interrupt), Request()]

    def reduce(self, comm: Any, wait: Any, in_place: Any, op: Any) -> None:
        for request in self.requests:
            wait(request)

    def unpack(self) -> None:
        self.unpacked = True


def posted(comm: FlagsComm) -> UsedParams:
    """Flags every parameter of which fired here, posted."""
    used = UsedParams(comm, 2, None)
    used.local.fill(1)
    used.post()
    return used


def test_an_interrupt_in_the_flags_wait_is_raised_once_every_bucket_is_in_and_told():
    interrupt = KeyboardInterrupt("the Wait of an Iallreduce on the job communicator")
    comm, buckets, told = FlagsComm(interrupt=interrupt), [HandBucket(), HandBucket()], []
    with pytest.raises(KeyboardInterrupt) as caught:
        reduce_all(buckets, None, None, posted(comm), lambda: told.append(True))
    assert caught.value is interrupt
    assert comm.request.waits == 2  # made again: the flags read, MPI sees them complete
    assert all(b.unpacked and [r.waits for r in b.requests] == [1, 1] for b in buckets)
    assert told == [True]  # the others finished the step: told at this rank's next call


def test_an_interrupt_in_a_reduction_by_hand_finishes_it_and_the_later_buckets():
    interrupt = KeyboardInterrupt("the Wait of an Ialltoall on the gradients communicator")
    buckets, told = [HandBucket(interrupt), HandBucket()], []
    with pytest.raises(KeyboardInterrupt) as caught:
        reduce_all(buckets, None, None, posted(FlagsComm()), lambda: told.append(True))
    assert caught.value is interrupt
    assert [r.waits for r in buckets[0].requests] == [2, 1]  # its Iallgather too
    assert all(b.unpacked for b in buckets) and told == [True]


@pytest.mark.parametrize("theirs", [FAILED, 1])
def test_a_kept_interrupt_goes_after_the_collectives_and_yields_to_every_ranks_refusal(theirs):
    """One kept from the last pieces' wait (``alone``): raised from the refusal of the flags
    where another rank said FAILED (every rank refuses: nothing told), else told and raised."""
    interrupt, bucket, told = KeyboardInterrupt("the Wait of an Iallreduce"), HandBucket(), []
    used = posted(FlagsComm(theirs))
    with pytest.raises(KeyboardInterrupt) as caught:
        reduce_all([bucket], None, None, used, lambda: told.append(True), [interrupt])
    assert caught.value is interrupt
    refused = theirs == FAILED
    assert isinstance(caught.value.__cause__, SyncError) == refused
    assert told == ([] if refused else [True])
    assert bucket.unpacked != refused


def test_this_ranks_failed_pack_said_in_the_flags_is_raised_at_once_and_not_told():
    """An interrupt :meth:`UsedParams.fail` kept (FAILED in the flags) is no wait's: every rank
    refuses the step, so it is raised as the flags are read, nothing told (the others wait in
    no collective of this rank's), no bucket unpacked, the flags' Wait made once."""
    interrupt, comm, bucket, told = (
        KeyboardInterrupt("in the last pack"),
        FlagsComm(),
        HandBucket(),
        [],
    )
    used = UsedParams(comm, 2, None)
    used.fail(interrupt, 2)
    used.post()
    with pytest.raises(KeyboardInterrupt) as caught:
        reduce_all([bucket], None, None, used, lambda: told.append(True))
    assert caught.value is interrupt
    assert comm.request.waits == 1 and not told and not bucket.unpacked


def test_to_the_end_keeps_the_first_interrupt_and_raises_a_second():
    first, second, kept = KeyboardInterrupt("1"), KeyboardInterrupt("2"), []
    raised = [first]

    def call() -> int:
        if raised:
            raise raised.pop(0)
        return 7

    assert to_the_end(call, kept) == 7
    assert kept == [first]
    raised.append(second)  # asked twice: stop at once
    with pytest.raises(KeyboardInterrupt) as caught:
        to_the_end(call, kept)
    assert caught.value is second and kept == [first]

    def failing() -> None:
        raise RuntimeError("an error, no interrupt: raised at once")

    with pytest.raises(RuntimeError):
        to_the_end(failing, [])


class Thread:
    """A communication thread that runs each call at once; its first ``finish`` raises an
    interrupt as it returns (a Ctrl-C in the main thread's wait for the flags), unless not
    ``interrupted``."""

    def __init__(self, interrupted: bool = True) -> None:
        self.calls, self.finishes = 0, 0 if interrupted else 1

    def call(self, work: Any, what: str, always: bool = False) -> object:
        self.calls += 1
        work(lambda request: request.Wait())
        return object()

    def finish(self, done: object) -> None:
        self.finishes += 1
        if self.finishes == 1:
            raise KeyboardInterrupt("CommThread.finish")


def test_the_flags_wait_on_the_thread_made_again_is_queued_once_and_reads_the_flags():
    """With the thread, an interrupt in the wait for the flags leaves them pending; the call
    made again waits for the same queued wait (a second would wait on a request read already)
    and reads them: another rank's FAILED is still refused."""
    thread, comm = Thread(), FlagsComm(theirs=FAILED)
    used = UsedParams(comm, 2, None)
    used.post(thread)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        used.complete()
    assert used.pending
    with pytest.raises(SyncError, match="another rank's finish_step failed"):
        used.complete()
    assert (thread.calls, thread.finishes, comm.request.waits) == (2, 2, 1)  # start, wait
    assert not used.pending


class InterruptedBucket(HandBucket):
    """A native bucket (its pieces reduced already) whose copy back meets a Ctrl-C."""

    def __init__(self) -> None:
        super().__init__()
        self.pieces, self.compressed = [slice(0, 1)], False

    def unpack(self) -> None:
        self.unpacked = True
        raise KeyboardInterrupt("second Ctrl-C")


def test_a_second_interrupt_in_a_copy_back_stops_at_once():
    """An interrupt kept from a wait, then a second in a bucket's copy back: asked twice, the
    rank stops there (as in a wait made again), the first raised from the second, nothing
    told. Before, the second was dropped and the later buckets copied back."""
    first, told = KeyboardInterrupt("the Wait of an Iallreduce"), []
    buckets = [InterruptedBucket(), HandBucket()]
    with pytest.raises(KeyboardInterrupt) as caught:
        reduce_all(buckets, None, None, posted(FlagsComm()), lambda: told.append(True), [first])
    assert caught.value is first
    assert str(caught.value.__cause__) == "second Ctrl-C"
    assert [b.unpacked for b in buckets] == [True, False] and told == []


class StoreInterrupted(UsedParams):
    """Flags whose ``at``-th attribute store, once set, meets a Ctrl-C first (a SIGINT raised
    between two of complete's steps, as Python 3.10 may)."""

    at: int | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        at = self.at
        if at is not None:
            object.__setattr__(self, "at", None if at == 0 else at - 1)
            if at == 0:
                raise KeyboardInterrupt(f"before {name}")
        super().__setattr__(name, value)


def completed(used: UsedParams, kept: list[BaseException]) -> BaseException:
    """What reduce_all's wait for the flags raises (another rank's FAILED: a refusal)."""
    with pytest.raises((SyncError, KeyboardInterrupt)) as caught:
        to_the_end(used.complete, kept, pending=lambda: used.pending)
    assert not used.pending
    return caught.value


@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
@pytest.mark.parametrize("at", range(6))
def test_an_interrupt_between_the_flags_stores_never_waits_on_a_request_dropped(thread, at):
    """A Ctrl-C at any store of complete, once its wait returned: made again (pending), it
    reads the same flags (another rank's FAILED refused, the interrupt kept), or, read already
    (not pending), the interrupt is raised at once. Before, one after the request was dropped
    and before the exchange stopped pending made the wait again on None: an AttributeError
    without the thread, and with it a wait on None queued there (the thread's failure)."""
    used, kept = StoreInterrupted(FlagsComm(theirs=FAILED), 2, None), []
    used.post(Thread(interrupted=False) if thread else None)  # type: ignore[arg-type]
    used.at = at
    raised = completed(used, kept)
    if isinstance(raised, SyncError):
        assert "another rank's finish_step failed" in str(raised)
        assert len(kept) <= 1 and all(isinstance(k, KeyboardInterrupt) for k in kept)
    else:
        assert kept == []


class FlagsReadInterrupted(np.ndarray):
    """The flags as received; their first read (one copy of their bytes) meets a Ctrl-C."""

    reads = 0

    def tobytes(self, *args: Any, **kwargs: Any) -> Any:
        FlagsReadInterrupted.reads += 1
        if FlagsReadInterrupted.reads == 1:
            raise KeyboardInterrupt("reading the flags")
        return super().tobytes(*args, **kwargs)


def test_an_interrupt_reading_the_flags_reads_them_again():
    """A Ctrl-C as the flags are read, once their wait returned: they stay pending and are
    read again (another rank's FAILED refused, the interrupt kept for reduce_all). Before, the
    exchange had stopped pending at its wait's end: the interrupt was raised at once, the
    refusal lost, and reduce_all left the step with its later buckets and its telling unmade."""
    used, kept = UsedParams(FlagsComm(theirs=FAILED), 2, None), []
    FlagsReadInterrupted.reads = 0
    used.anywhere = np.zeros(2, dtype=np.uint8).view(FlagsReadInterrupted)
    used.post()
    raised = completed(used, kept)
    assert isinstance(raised, SyncError), raised
    assert [str(k) for k in kept] == ["reading the flags"]
    assert FlagsReadInterrupted.reads == 2  # read again, not skipped


def test_to_the_end_passes_its_arguments_to_each_call_made():
    """reduce_all waits for a bucket as ``to_the_end(_wait, alone, thread, bucket)``: no object
    made per bucket on the healthy path; the call made again gets the same arguments."""
    got, kept = [], []

    def wait(thread: str, bucket: int) -> None:
        got.append((thread, bucket))
        if len(got) == 1:
            raise KeyboardInterrupt("CommThread.wait")

    to_the_end(wait, kept, "thread", 3)
    assert got == [("thread", 3), ("thread", 3)] and [str(k) for k in kept] == ["CommThread.wait"]


class ReadInterrupted(HandBucket):
    """A 16-bit bucket whose first read of ``pieces`` meets a Ctrl-C: one raised between two
    buckets of reduce_all, outside any wait or held start."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    @property
    def pieces(self) -> list:
        self.reads += 1
        if self.reads == 1:
            raise KeyboardInterrupt("between buckets")
        return []

    @pieces.setter
    def pieces(self, value: list) -> None:
        pass


def test_an_interrupt_between_buckets_is_kept_and_no_bucket_is_reduced_twice():
    """Bucket 0 reduced by hand and copied back, then a Ctrl-C before bucket 1's reduction:
    kept, bucket 1 reduced and copied back, the interrupt raised and told; bucket 0 is not
    reduced again (its collectives started twice would meet another of the other ranks').
    Before, it went up at once, bucket 1's collectives never started."""
    buckets, told = [HandBucket(), ReadInterrupted()], []
    with pytest.raises(KeyboardInterrupt, match="between buckets"):
        reduce_all(buckets, None, None, posted(FlagsComm()), lambda: told.append(True))
    assert [[r.waits for r in b.requests] for b in buckets] == [[1, 1], [1, 1]]
    assert all(b.unpacked for b in buckets) and told == [True]


class DoneInterrupted(UsedParams):
    """Flags whose exchange, once over (no longer pending), meets a Ctrl-C before ``complete``
    raises the refusal it read (the other rank said FAILED)."""

    def _done(self) -> None:
        super()._done()
        raise KeyboardInterrupt("as the refusal is raised")


def test_an_interrupt_as_the_flags_refusal_is_raised_starts_no_bucket_and_is_not_told():
    """The flags refused the step on every rank, then a Ctrl-C before that refusal is raised:
    it is raised at once, no bucket reduced (the others, refused, start none) and nothing
    told (a failure every rank shares). Before, the step was not yet marked refused there:
    reduce_all kept the interrupt and made the rest again, reducing a 16-bit bucket by hand
    alone (the others never met it) and telling the failure as this rank's."""
    bucket, told = HandBucket(), []
    used = DoneInterrupted(FlagsComm(FAILED), 2, None)
    used.local.fill(1)
    used.post()
    with pytest.raises(KeyboardInterrupt, match="as the refusal is raised"):
        reduce_all([bucket], None, None, used, lambda: told.append(True))
    assert [r.waits for r in bucket.requests] == [0, 0] and not told and used.refused
