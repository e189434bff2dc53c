"""A step's finishing half in :class:`~distconv.sync.mpi.MPISync`: :meth:`Finishing.finish_step`
waits for the step's check and the pieces left, sends the used-parameter flags, runs the
optimizer on every reduced bucket (:meth:`Finishing._apply`, after the ``grad_hook``) and ends
the step, or says this rank's failure in the flags where it failed before them."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from distconv.optim import Optimizer
from distconv.sync.base import StateDict, SyncError
from distconv.sync.mpi.buckets import Bucket
from distconv.sync.mpi.hook import mean_divisor
from distconv.sync.mpi.kept import keep, stopping
from distconv.sync.mpi.last_pieces import send_and_update
from distconv.sync.mpi.pieces import PiecePump, Slot
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.updates import refused_alike, update_step
from distconv.sync.mpi.used import UsedParams


class Finishing:
    """The finishing half of :class:`~distconv.sync.mpi.MPISync` (a mixin before its bases).

    It reads and sets what the sync sets up and each ``start_step`` resets: ``buckets``,
    ``_in_step``, ``_check``, ``_check_refused``, ``_used``, ``_slot``, ``_total``, ``_thread``,
    ``_pump``, ``_grad_comm``, ``_ended_alike``, ``_open``, ``_changed_in``, ``step``,
    ``sync_seconds``, ``state``, and calls the sync's ``_complete_check``, ``_launch_ready``,
    ``_fail_step``, ``_note_failed_step`` and ``_record_first_pass``.
    """

    buckets: list[Bucket]
    optimizer: Optimizer
    state: StateDict
    grad_hook: Callable[..., None] | None
    world_size: int
    step: int
    sync_seconds: float
    _in_step: bool
    _check: StepCheck
    _check_refused: bool
    _ended_alike: bool
    _used: UsedParams
    _slot: dict[str, Slot]
    _total: int
    _thread: CommThread | None
    _pump: PiecePump | None
    _grad_comm: Any
    _open: str | None
    _changed_in: str | None
    _watchdog: Any
    _failed_finish: int | None
    # the sync's (annotated only: not shadowed here)
    _complete_check: Callable[[], None]
    _launch_ready: Callable[..., None]
    _fail_step: Callable[..., None]
    _note_failed_step: Callable[..., None]
    _record_first_pass: Callable[[list[bool]], None]

    def finish_step(self) -> None:
        """Wait for every bucket, apply the optimizer (averaging inside it), zero gradients."""
        if not self._in_step:
            raise SyncError("finish_step without start_step")
        began, checked = time.perf_counter(), self._check_refused  # (in backward: pieces went)
        try:  # before the flags: a bucket this rank fails to pack is said in them (fail); the
            # check too (no bucket went during backward), where a fast rank waits for a slow one
            # over from here (a Ctrl-C before: still open, abandon_step lets it go; after: in
            # the flags, as a failed pack): over first, one between left it to neither
            self._in_step = False
            self._complete_check()
            self._launch_ready(everything=True)
            self._check.raise_kept()  # a Ctrl-C as start_step posted the check, said in the flags
        except BaseException as exc:  # an interrupt too: raised here once the pieces went
            self._in_step, said = False, exc  # said in the flags, not let go of by abandon_step
            try:
                while True:  # a Ctrl-C in here (no wait's, no start held): said, not raised
                    try:  # (before, the flags never went: the others waited, close aborted)
                        said = self._check.kept_over(said)  # one kept at start_step wins
                        self._fail_step(exc, said, checked)
                        break
                    except KeyboardInterrupt as again:  # said (raised on purpose), or twice
                        if again is said or not isinstance(said, Exception):
                            raise
                        said = again  # exc its context
            finally:  # the wait so far (a check refused here), as in backward: counted once
                now = time.perf_counter()
                self.sync_seconds, began = self.sync_seconds + now - began, now
        alone: list[BaseException] = []  # an interrupt in a piece's wait: the step goes on
        done: list[bool] = []  # every update made: appended by update_step, before any Ctrl-C
        try:  # the flags' start too: an error there must not lose a failed pack (note_unsaid)
            # what fired anywhere and the pieces left: to the wire (reduce_all waits for the
            # flags) or the thread; then all or none (updates), a failure here alone told later
            args = (self.buckets, self._used, self._apply, self._slot, self._note_failed_step)
            every = (self._thread, self._grad_comm, self.world_size, *args, alone, done)
            hook = self.grad_hook  # its divisor only with it: without, mixed buckets train
            total = None if hook is None else mean_divisor(self.buckets, self._total)
            last = (self._used, self._thread, self._pump, alone, self.world_size)
            while True:  # a Ctrl-C kept in alone, as it is called too (nothing sent yet)
                entered: list[bool] = []
                try:  # partial too: a call, where Python raises a Ctrl-C (no call before it)
                    update = partial(update_step, *every)
                    if hook is not None:  # only then: without one, the call is as it was
                        update = partial(update, before=lambda params: hook(params, total))
                    send_and_update(*last, update, entered)
                    break
                except KeyboardInterrupt as exc:
                    if entered or stopping(alone) or self.world_size == 1:
                        raise
                    keep(alone, exc)
            done.append(True)  # (one rank with the thread: update_step appends nothing)
        except BaseException as exc:  # before the flags said this rank's failed pack: a Ctrl-C too
            self._ended_alike = refused_alike(exc)  # a 16-bit wire, on every rank
            self._used.note_unsaid(exc)
            raise
        finally:  # failed once every collective of the step completed, alike on every rank
            # (the flags' refusal, or this rank's failure alone): close may leave (Shutdown)
            self._ended_alike |= self._used.refused or self._failed_finish == self.step
            self.step += 1
            if done:  # every update made (a Ctrl-C since too): over once the first step's firing
                self._changed_in = None  # a whole step, whatever that order's exchange does next
                made: list[bool] = []  # order is in (its last collective, every rank's; the
                try:  # empty one too, where rank 0 fired nothing), a Ctrl-C after it too
                    self._record_first_pass(made)
                finally:  # stores alone, before any call (a Ctrl-C is raised at one)
                    if made:
                        self._watchdog.phase, self._open = f"after step {self.step - 1}", None
            self.sync_seconds += time.perf_counter() - began

    def _apply(self, bucket: Bucket, used: np.ndarray | None, checked: list | None = None) -> None:
        """The optimizer on the reduced gradients (views of the bucket) of the parameters that
        fired on some rank (``used``: their flags; None: all of them), then zero gradients.
        ``checked``: those parameters, as ``to_update`` returned them with no call since."""
        self._changed_in = self._open  # the step's update began (see state_dict)
        scale = bucket.grad_scale(self._total)
        for p in bucket.to_update(used, self._slot) if checked is None else checked:
            self.optimizer.update(p.value, p.grad, self.state[p.name], grad_scale=scale)
        spent = bucket.clear()
        if spent is not None:
            self._thread.zero(spent)  # done before this bucket's next reduction
