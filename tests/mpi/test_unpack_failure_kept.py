"""reduce_all keeps one rank's failed copy back (an unpack's error) until the step's collectives
are in; what is raised after it, a later bucket's refusal or ``failed_alone``'s own error, still
names it."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi.updates import reduce_all, update_step

pytestmark = pytest.mark.timeout(30)


class StubBucket:
    """A native-wire bucket (one piece, reduced elsewhere) whose unpack raises ``error``."""

    def __init__(self, index: int, error: BaseException | None = None) -> None:
        self.index, self.error, self.unpacked = index, error, False
        self.pieces, self.compressed = [slice(0, 1)], False

    def unpack(self) -> None:
        if self.error is not None:
            raise self.error
        self.unpacked = True


class StubUsed:
    """The flags' exchange, already complete."""

    pending = False

    def complete(self) -> np.ndarray:
        return np.ones(2, dtype=np.uint8)


class StubThread:
    """The communication thread: its wait for a bucket raises that bucket's ``failure``."""

    def wait(self, bucket: Any) -> None:
        if getattr(bucket, "failure", None) is not None:
            raise bucket.failure


def run(buckets: list[StubBucket], failed_alone: Any = lambda: None, thread: Any = None) -> None:
    reduce_all(buckets, thread, None, StubUsed(), failed_alone)  # type: ignore[arg-type]


@pytest.mark.parametrize("threaded", [False, True])
def test_a_later_buckets_refusal_raised_on_every_rank_still_names_this_ranks_copy_back(threaded):
    """The refusal (a 16-bit wire's check: in the main thread's unpack, or the thread's failure
    its wait raises) is raised alike on every rank; this rank's own failure goes with it."""
    copy = RuntimeError("device copy of bucket 0 failed")
    refused = SyncError("gradient bucket 1 is not finite after the float16 wire")
    later = StubBucket(1, None if threaded else refused)
    later.failure = refused if threaded else None  # type: ignore[attr-defined]
    told: list[bool] = []
    thread = StubThread() if threaded else None
    with pytest.raises(SyncError, match="not finite") as caught:
        run([StubBucket(0, copy), later], lambda: told.append(True), thread)
    assert not told  # every rank refuses the step alike: nothing to tell
    assert any("device copy of bucket 0 failed" in note for note in caught.value.__notes__)


def test_an_error_of_failed_alone_is_raised_from_the_kept_copy_back():
    copy = RuntimeError("device copy of bucket 0 failed")
    later = StubBucket(1)

    def failed_alone() -> None:
        raise SyncError("waited 20.0 s in the Allgather of the firing order")

    with pytest.raises(SyncError, match="firing order") as caught:
        run([StubBucket(0, copy), later], failed_alone)
    assert caught.value.__context__ is copy
    assert later.unpacked  # the later buckets went on before it


def test_the_kept_copy_back_is_raised_after_failed_alone():
    copy = RuntimeError("device copy of bucket 0 failed")
    told: list[bool] = []
    with pytest.raises(RuntimeError, match="device copy") as caught:
        run([StubBucket(0, copy), StubBucket(1)], lambda: told.append(True))
    assert caught.value is copy and told == [True]


class HandBucket(StubBucket):
    """A 16-bit bucket without the thread: reduced by hand in reduce_all (a collective)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.pieces, self.reduced = [], False

    def reduce(self, *args: Any) -> None:
        self.reduced = True


@pytest.mark.parametrize("later_refused", [False, True])
def test_an_interrupt_in_a_copy_back_is_raised_once_the_collectives_are_in(later_refused):
    """A KeyboardInterrupt in bucket 0's copy back on this rank alone: the later bucket is still
    reduced (the other ranks wait in that collective) and ``failed_alone`` told, then the
    interrupt is raised; a later refusal does not swallow it (it is the interrupt's context)."""
    stop, told = KeyboardInterrupt("second Ctrl-C"), []
    later = HandBucket(1)
    later.error = SyncError("gradient bucket 1 is not finite") if later_refused else None
    with pytest.raises(KeyboardInterrupt) as caught:
        run([StubBucket(0, stop), later], lambda: told.append(True))
    assert caught.value is stop and later.reduced
    if later_refused:  # every rank refuses alike: nothing to tell, but the interrupt goes on
        assert isinstance(stop.__context__, SyncError) and not told
    else:
        assert later.unpacked and told == [True]


def test_an_interrupt_in_an_update_is_told_as_a_failure_of_this_rank_alone():
    """Every collective is in when the optimizer runs: an interrupt there (a SIGINT reaching
    this rank alone) is this rank's failure, told (``failed_alone``: on the first step, the
    firing order's Allgather the other ranks wait in), then raised."""
    bucket, told = StubBucket(0), []
    bucket.to_update = lambda flags, slots: []  # type: ignore[attr-defined]

    def update(*args: Any) -> None:
        raise KeyboardInterrupt("second Ctrl-C")

    with pytest.raises(KeyboardInterrupt):
        update_step(None, None, 2, [bucket], StubUsed(), update, {}, lambda: told.append(True))
    assert told == [True]


class RefusingUsed:
    """The flags' exchange, completed on the thread: another rank's pack failed (FAILED)."""

    def complete(self) -> np.ndarray:
        raise SyncError("another rank's finish_step failed (an error there, which it raised)")


@pytest.mark.parametrize(
    "kept", [KeyboardInterrupt("second Ctrl-C"), RuntimeError("device copy of bucket 0 failed")]
)
def test_the_flags_refusal_with_the_thread_does_not_swallow_a_kept_copy_back(kept):
    """With the thread the flags are completed after every copy back: a refusal there, raised
    on every rank alike, must not drop this rank's kept failure. An interrupt is raised (the
    refusal its cause); another error goes as a note on the refusal (Python 3.11 on)."""
    told: list[bool] = []
    with pytest.raises(BaseException) as caught:
        reduce_all(
            [StubBucket(0, kept), StubBucket(1)],  # type: ignore[list-item]
            StubThread(),  # type: ignore[arg-type]
            None,
            RefusingUsed(),  # type: ignore[arg-type]
            lambda: told.append(True),
        )
    assert not told  # every rank refuses the step alike: nothing to tell
    if isinstance(kept, KeyboardInterrupt):
        assert caught.value is kept and isinstance(kept.__cause__, SyncError)
    else:
        assert isinstance(caught.value, SyncError)
        if sys.version_info >= (3, 11):
            assert any("device copy of bucket 0" in note for note in caught.value.__notes__)


def test_an_interrupt_after_a_kept_copy_back_is_not_dropped():
    """Bucket 0's copy back failed (kept), then a Ctrl-C reaches bucket 1's: the interrupt is
    what is raised once the collectives are in and ``failed_alone`` told, the error its
    context; before, only the first was kept and the interrupt was dropped."""
    copy, stop, told = RuntimeError("device copy of bucket 0 failed"), KeyboardInterrupt(), []
    later = StubBucket(2)
    with pytest.raises(KeyboardInterrupt) as caught:
        run([StubBucket(0, copy), StubBucket(1, stop), later], lambda: told.append(True))
    assert caught.value is stop and stop.__context__ is copy
    assert later.unpacked and told == [True]


def refuse_to_tell() -> None:
    raise SyncError("waited 20.0 s in the Allgather of the firing order")


@pytest.mark.parametrize("where", ["update", "copy back"])
def test_an_error_of_failed_alone_does_not_replace_an_interrupt(where):
    """``failed_alone`` raising (its Allgather on the first step) while an interrupt of this
    rank alone is told: the interrupt is still raised, from that error; before, the error
    replaced it and the rank, asked to stop, raised an Exception a caller may go on from."""
    stop = KeyboardInterrupt("second Ctrl-C")
    with pytest.raises(KeyboardInterrupt) as caught:
        if where == "copy back":
            run([StubBucket(0, stop), StubBucket(1)], refuse_to_tell)
        else:
            bucket = StubBucket(0)
            bucket.to_update = lambda flags, slots: []  # type: ignore[attr-defined]

            def update(*args: Any) -> None:
                raise stop

            update_step(None, None, 2, [bucket], StubUsed(), update, {}, refuse_to_tell)
    assert caught.value is stop and isinstance(stop.__cause__, SyncError)


def chain(error: BaseException | None) -> list[BaseException]:
    """``error`` and every exception behind it (its cause, else its context), in turn."""
    seen: list[BaseException] = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


@pytest.mark.parametrize("after", ["a later bucket's refusal", "failed_alone's error"])
def test_the_error_an_interrupt_replaced_is_still_in_its_chain(after):
    """An interrupt replaced a kept copy back's error (that error its context); raised from a
    later refusal or from ``failed_alone``'s error, that error stays behind it, not dropped."""
    copy, stop = RuntimeError("device copy of bucket 0 failed"), KeyboardInterrupt()
    refused = SyncError("gradient bucket 2 is not finite after the float16 wire")
    told = SyncError("waited 20.0 s in the Allgather of the firing order")
    buckets = [StubBucket(0, copy), StubBucket(1, stop)]
    buckets.append(StubBucket(2, refused if after.startswith("a later") else None))

    def failed_alone() -> None:
        raise told

    with pytest.raises(KeyboardInterrupt) as caught:
        run(buckets, failed_alone)
    assert caught.value is stop
    assert chain(stop)[1] is (refused if after.startswith("a later") else told)
    assert copy in chain(stop)


class InterruptedUsed:
    """The flags' exchange raising this rank's own kept pack failure, an interrupt (read: not
    pending, the step refused on every rank, as UsedParams.complete marks it)."""

    pending, refused = False, True

    def __init__(self, stop: KeyboardInterrupt) -> None:
        self.stop = stop

    def complete(self) -> None:
        raise self.stop


def test_an_interrupt_completing_the_flags_with_the_thread_names_a_kept_copy_back():
    """With the thread the flags are completed after every copy back; where they raise this
    rank's interrupted pack (kept by UsedParams.fail), the interrupt goes up, and a copy back's
    error kept before it goes as a note on it, not dropped."""
    copy, stop = RuntimeError("device copy of bucket 0 failed"), KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as caught:
        reduce_all(
            [StubBucket(0, copy), StubBucket(1)],  # type: ignore[list-item]
            StubThread(),  # type: ignore[arg-type]
            None,
            InterruptedUsed(stop),  # type: ignore[arg-type]
        )
    assert caught.value is stop
    assert any("device copy of bucket 0 failed" in note for note in stop.__notes__)
