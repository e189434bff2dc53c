"""mpiexec -n 2 python -m mpi4py run_start_interrupt.py OUT WHERE [HOW]: a SIGINT on rank 0
alone (``os.kill`` of its own process: process-directed, as a terminal's Ctrl-C or
``mpiexec``'s forward is) right after its first gradient piece's collective started, before
the piece is recorded: ``WHERE`` is ``main`` (no communication thread: the piece's
``Iallreduce`` returned, its request not yet stored) or ``thread`` (the piece handed to the
communication thread, the hand-over not yet counted) or ``wire`` (a 16-bit wire, no thread: a
bucket's ``Ialltoall``, the first of its reduction by hand, returned, its wait not yet begun;
``wire-before`` or ``wire-after``: just before that wait's keeping begins, or once it ended)
or ``check`` or ``thread-check`` (``start_step``'s step check: its ``Iallgather`` returned,
its request not yet stored) or ``flags`` (no thread: the used-parameter flags' ``Iallreduce``
returned, its request not yet stored) or ``thread-flags`` (their start queued to the thread)
or ``wire-between`` or ``thread-between`` (in ``finish_step``, once bucket 0 is copied back,
before bucket 1 is waited for: outside any wait or held start) or ``wire-entry`` (as the
reduction by hand of bucket 0 begins, before its first start is held) or ``finish`` (as
``finish_step`` begins, at its first clock read, nothing launched yet: every rank then
abandons the step and sets up again, as with ``launch``) or ``clock`` (at its last clock
read, every update made) or ``reduced`` or ``thread-reduced``
(once ``reduce_all`` returned, before the updates: every collective of the step is in) or
``post-entry`` or ``thread-post-entry`` (as ``send_last`` calls the flags' ``post``,
before its start is reached: nothing made) or ``send-entry`` (as ``finish_step`` makes the
``partial`` it calls ``send_and_update`` with, its first call since the step's pieces went,
before that keeping begins: nothing sent) or ``flags-raised`` (no
thread: the flags' start made, then raised, a Ctrl-C noted meanwhile) or ``posted`` or
``thread-posted`` (once the used-parameter flags' start returned, before the step's last
pieces go) or
``check-returned`` or ``thread-check-returned`` (once the step check's post returned, its
request stored, before ``start_step`` opened the step) or
``recorded`` or ``thread-recorded`` (once ``finish_step`` gathered the first step's firing
order, its last collective, before it marked the step over) or ``updated`` or
``thread-updated`` (once ``update_step`` returned, every update made).

Only ``a`` fires, so both buckets go in step 0's ``finish_step``; with ``launch`` only ``b``
fires, launching bucket 0 from ``on_gradient``, where rank 0 is interrupted: every rank then
abandons the step, as ``Trainer.fit`` does, and sets up again (its SyncError written to
``OUT/setup<rank>.txt``). ``HOW`` ``abandon``: rank 0 abandons the step after ``start_step``
(as ``Trainer.fit`` does when a layer raises in backward), rank 1 steps, and both set up again
likewise (a KeyboardInterrupt from that setup, raised once it is made, written to
``OUT/again<rank>.txt``, and the step taken, or the setup's refusal said: with ``flags``,
rank 0 is interrupted as that setup starts the flags the abandoned step owes); ``pack``: the
first pack of ``b``'s bucket in ``finish_step`` fails on rank 0 (as a failed device copy
would), and each rank writes the ``repr`` of what its step raised's context to
``OUT/context<rank>.txt``; ``setup``: each rank sets up again straight after ``start_step``
(what that setup raised written as the step's), then takes one last step
(:func:`~tests.mpi.common.step_and_save`); ``later``: a whole step first, the interrupted
one the second. Each rank writes what its step raised to
``OUT/said<rank>.txt`` (``nothing`` where nothing was), then closes its sync
(:func:`~tests.mpi.common.recorded`): a close that aborts ends the job with a status not 0.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import distconv.sync.mpi.finishing as finishing  # finish_step's module
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, updates
from distconv.sync.mpi.thread import CommThread
from tests.mpi.common import bucket_params, bucket_sync, recorded, refit_and_save, step_and_save
from tests.mpi.run_check_interrupt import step, what_raises
from tests.mpi.run_pack_failure import fail_first_pack

#: the job communicator's start interrupted, by ``WHERE`` (``thread-`` too): its first call
#: after setup
STARTS = {"check": "Iallgather", "flags": "Iallreduce"}


def main() -> None:
    out, where, how = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    launch, abandon, pack = how == ["launch"], how == ["abandon"], how == ["pack"]
    again, later = how == ["setup"], how == ["later"]
    wire = {"grad_dtype": "float16"} if where.startswith("wire") else {}  # by hand, no thread
    sync = bucket_sync(overlap=where.startswith("thread"), timeout=3, **wire)
    start = STARTS.get(where.removeprefix("thread-"))
    params = bucket_params()
    if pack and sync.rank == 0:
        fail_first_pack(sync, "b")
    with recorded(sync, out):
        sync.setup(params, {})
        if later:  # a whole step first: the firing order recorded, the step interrupted next
            sync.start_step(1)
            step(sync, params[0])
        if sync.rank == 0 and where == "thread":
            CommThread.submit = interrupted_after(CommThread.submit)  # type: ignore[method-assign]
        elif sync.rank == 0 and where == "thread-flags":  # the flags' start queued, first
            CommThread.call = interrupted_after(CommThread.call)  # type: ignore[method-assign]
        elif sync.rank == 0 and start:  # the job communicator's own (watched) start
            setattr(sync.comm, start, interrupted_after(getattr(sync.comm, start)))
        elif sync.rank == 0 and where in ("wire-before", "wire-after"):  # around a wait
            updates.to_the_end = interrupted_wait(updates.to_the_end, where == "wire-before")
        elif sync.rank == 0 and where.endswith("-between"):  # after bucket 0's copy back
            updates._unpack = interrupted_after(updates._unpack)
        elif sync.rank == 0 and where in ("finish", "clock"):  # finish_step's clock: its first
            clock = interrupted_before(time.perf_counter, int(where == "clock"))  # call, or last
            finishing.time = SimpleNamespace(perf_counter=clock)  # type: ignore[assignment]
        elif sync.rank == 0 and where.endswith("reduced"):  # every collective in, no update
            updates.reduce_all = interrupted_after(updates.reduce_all)
        elif sync.rank == 0 and where.endswith("updated"):  # every update made, not yet done
            finishing.update_step = interrupted_after(finishing.update_step)
        elif sync.rank == 0 and where.endswith("posted"):  # the flags started, no last piece
            sync._used.post = interrupted_after(sync._used.post)  # type: ignore[method-assign]
        elif sync.rank == 0 and where == "flags-raised":  # the flags' start made, then raised
            sync._used._start = raised_once_made(sync._used._start)  # type: ignore[method-assign]
        elif sync.rank == 0 and where.endswith("post-entry"):  # the flags' start, nothing made
            sync._used.post = interrupted_before(sync._used.post)  # type: ignore[method-assign]
        elif sync.rank == 0 and where.endswith("check-returned"):  # the check posted, no step
            sync._check.post = interrupted_after(sync._check.post)  # type: ignore[method-assign]
        elif sync.rank == 0 and where.endswith("recorded"):  # the step's last collective made
            sync._record_first_pass = interrupted_after(sync._record_first_pass)  # type: ignore[method-assign]
        elif sync.rank == 0 and where == "send-entry":  # the step's sending, nothing sent
            finishing.partial = interrupted_before(finishing.partial)
        elif sync.rank == 0 and where == "wire-entry":  # bucket 0's reduction by hand begins
            updates._by_hand = interrupted_before(updates._by_hand)
        elif sync.rank == 0 and where == "wire":  # a 16-bit bucket's first start, by hand
            sync._grad_comm.Ialltoall = interrupted_after(sync._grad_comm.Ialltoall)
        elif sync.rank == 0:  # the watched gradient communicator's own start (an instance's)
            sync._grad_comm.Iallreduce = interrupted_after(sync._grad_comm.Iallreduce)
        sync.start_step(1)
        if abandon and sync.rank == 0:  # a layer raised in backward: the step let go of
            said = what_raises(sync.abandon_step)
        elif again:  # set up again, the step neither finished nor abandoned
            said = what_raises(lambda: sync.setup(params, {}))
            step_and_save(sync, params, out)
        else:
            said = what_raises(lambda: context_noted(out, sync.rank, step, sync, params[launch]))
        (out / f"said{sync.rank}.txt").write_text(said)
        if launch or abandon or where == "finish":
            sync.abandon_step()
            try:
                refit(sync, params, out)
            except SyncError as exc:
                (out / f"setup{sync.rank}.txt").write_text(f"{type(exc).__name__}: {exc}")


def refit(sync: MPISync, params: list[Parameter], out: Path) -> None:
    """:func:`~tests.mpi.common.refit_and_save`; where its setup raised a KeyboardInterrupt
    (written to ``out/again<rank>.txt``), held to the setup's end, the step taken all the same,
    as a rank that goes on would, or the setup's own refusal (its context) raised."""
    try:
        refit_and_save(sync, params, out)
    except KeyboardInterrupt as exc:
        (out / f"again{sync.rank}.txt").write_text(f"{type(exc).__name__}: {exc}")
        if isinstance(exc.__context__, SyncError):  # the setup refused on every rank alike
            raise exc.__context__ from None
        step_and_save(sync, params, out)


def context_noted(out: Path, rank: int, call: Callable[..., Any], *args: Any) -> None:
    """``call(*args)``; what it raises, raised, its ``__context__``'s ``repr`` written to
    ``out/context<rank>.txt`` first."""
    try:
        call(*args)
    except BaseException as exc:
        (out / f"context{rank}.txt").write_text(repr(exc.__context__))
        raise


def interrupted_wait(to_the_end: Callable[..., Any], before: bool) -> Callable[..., Any]:
    """``to_the_end``, which sends this process a SIGINT just before it makes a request's
    ``Wait`` (``before``) or once that returned, the first time only: raised outside the
    wait's keeping, where no start is held."""
    sent: list[bool] = []

    def interrupted(call: Callable[..., Any], *args: Any, **options: Any) -> Any:
        if sent or getattr(call, "__name__", None) != "Wait":
            return to_the_end(call, *args, **options)
        sent.append(True)
        if before:
            os.kill(os.getpid(), signal.SIGINT)
        waited = to_the_end(call, *args, **options)
        if not before:
            os.kill(os.getpid(), signal.SIGINT)
        return waited

    return interrupted


def raised_once_made(start: Callable[[], None]) -> Callable[[], None]:
    """``start``, which once made the first time sends this process a SIGINT (held there) and
    raises: the flags' start made, not recorded, a Ctrl-C noted meanwhile."""
    calls: list[None] = []

    def raised() -> None:
        start()
        calls.append(None)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)
            raise RuntimeError("the flags' start raised once made")

    return raised


def interrupted_before(call: Callable[..., Any], after: int = 0) -> Callable[..., Any]:
    """``call``, which sends this process a SIGINT before it is made, once: the first time,
    or once it was made ``after`` times."""
    calls: list[None] = []

    def interrupted(*args: Any) -> Any:
        calls.append(None)
        if len(calls) == after + 1:
            os.kill(os.getpid(), signal.SIGINT)  # raised here, at Python's next check
        return call(*args)

    return interrupted


def interrupted_after(start: Callable[..., Any], signum: int = signal.SIGINT) -> Callable[..., Any]:
    """``start``, which sends this process a SIGINT (or ``signum``) once it returned, the first
    time only."""
    sent: list[bool] = []

    def interrupted(*args: Any) -> Any:
        started = start(*args)
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signum)  # its handler runs at Python's next check
        return started

    return interrupted


if __name__ == "__main__":
    main()
