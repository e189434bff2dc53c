"""Allreduce over MPI: gradients in buckets, reduced while backward goes on, a local optimizer.

Every rank runs the same optimizer on the same summed gradients, so every rank ends each step
with identical parameters (Horovod's ``DistributedOptimizer`` and PyTorch DDP's reducer are the
models). One step:

1. :meth:`MPISync.start_step` posts the ranks' agreement on step, layout and examples
   (:mod:`~distconv.sync.mpi.step_check`), completed before the first gradient collective.
2. Each gradient is a view into its bucket's flat buffer, so the layers' ``+=`` writes straight
   into what goes on the wire, in pieces (:mod:`~distconv.sync.mpi.pieces`), one allreduce at a
   time, in layout order (the same on every rank, as MPI needs), each once its gradients are in
   (a bucket staged or cast first: once the whole bucket is).
3. :meth:`MPISync.finish_step` waits for the rest and runs the optimizer on the sums with
   ``grad_scale = 1 / global examples`` (16-bit buckets are averaged in
   :meth:`~distconv.sync.mpi.buckets.Bucket.pack` instead), then zeroes the gradients. A
   ``grad_hook`` sees every reduced gradient first, before any update (a global-norm clip).

Buckets follow the order in which the first backward pass fired the parameters (before that,
the reverse of the network's order, DDP's guess too).

Overlap: MPICH makes no progress on a non-blocking collective while Python computes. A
communication thread (``overlap=True``, on a duplicate communicator) reduces the pieces handed
to it while backward goes on; it pays only where compute leaves a core free (a GPU, or cores
the ranks' kernel threads leave; :func:`~distconv.sync.mpi.comm.want_thread`). Otherwise the
main thread tests the piece on the wire at each gradient. ``grad_dtype="float16"`` (or
``"bfloat16"``) halves the bytes (see :meth:`~distconv.sync.mpi.buckets.Bucket.reduce`). World
size 1 runs the same code with :class:`SingleRankComm` standing in for MPI. Run as ``mpiexec
-n N python -m mpi4py -m distconv train --sync mpi``: ``-m mpi4py`` and the hook installed here
make one rank's crash abort the job, and a watchdog (:mod:`~distconv.sync.mpi.watchdog`) stops
one that waits longer than ``timeout`` for a rank that never comes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from distconv.backend import is_gpu_array
from distconv.optim import Optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError, SyncStrategy
from distconv.sync.closing import mark_set_up, open_step
from distconv.sync.local import say_setup_takes_part
from distconv.sync.mpi.abandon import Abandon
from distconv.sync.mpi.arrivals import Arrivals
from distconv.sync.mpi.buckets import Bucket, grads_moved
from distconv.sync.mpi.check_completion import CheckCompletion
from distconv.sync.mpi.collectives import AFTER_FAILED_SETUP, WAYS_ON, RankCollectives, held
from distconv.sync.mpi.comm import (
    SingleRankComm,
    check_poll_seconds,
    import_mpi,
    job_world,
    thread_poll_seconds,
)
from distconv.sync.mpi.finishing import Finishing
from distconv.sync.mpi.hook import hook_description, refuse_mixed_layout
from distconv.sync.mpi.layout import BucketLayout, Raising, taken_once
from distconv.sync.mpi.leaving import install_abort_hook
from distconv.sync.mpi.pieces import PiecePump, Slot, check_sizes
from distconv.sync.mpi.setup_start import SETUP_OPEN, SetupStart
from distconv.sync.mpi.shutdown import NEVER_SET_UP, Shutdown
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import UsedParams
from distconv.sync.mpi.watchdog import DEFAULT_TIMEOUT, check_timeout, duplicate, watch
from distconv.sync.mpi.wire_dtypes import wire_dtype

__all__ = ["DEFAULT_BUCKET_BYTES", "MPISync"]

#: gradient bytes per bucket: large enough that the per-call cost (tens of microseconds) is
#: small against the transfer, small enough that the first buckets start during backward
DEFAULT_BUCKET_BYTES = 4 << 20


class MPISync(
    Arrivals,
    Finishing,
    Abandon,
    CheckCompletion,
    Shutdown,
    BucketLayout,
    SetupStart,
    RankCollectives,
):
    """Data-parallel training over MPI: bucketed allreduce, then the optimizer on every rank.

    Args:
        optimizer: the update rule, run on every rank on the summed gradients, averaged inside
            it (``grad_scale``).
        comm: an mpi4py communicator; None takes ``MPI.COMM_WORLD``, or :class:`SingleRankComm`
            when mpi4py is not installed (:func:`~.comm.job_world`: a RuntimeConfigError where
            an MPI launcher started this process as one of several ranks).
        bucket_bytes: gradient bytes per bucket (default :data:`DEFAULT_BUCKET_BYTES`, 4 MiB);
            a parameter larger than that gets a bucket of its own.
        grad_dtype: the dtype on the wire: None (the gradients' own), ``"float32"``,
            ``"float64"``, ``"float16"`` or ``"bfloat16"`` (summed in float32).
        overlap: reduce on a communication thread while backward goes on; None decides by the
            machine (see the module docstring). Ignored, with a logged reason, when MPI was
            initialised below ``MPI_THREAD_SERIALIZED``.
        first_piece_bytes: bytes of the layout's first allreduce (default ``piece_bytes``).
        piece_bytes: bytes of a full-size allreduce; the pieces double up to it. None:
            :data:`~distconv.sync.mpi.pieces.PIECE_BYTES` (1 MiB) with the communication
            thread, a bucket in one call without (``bucket_bytes``; a gradient larger than
            that has a bucket of its own, in one call too). A bucket's last piece may
            take up to 1.5x that (a sliver joins it; see :func:`~.pieces.plan_pieces`).
        last_piece_bytes: bytes of the layout's last allreduce, which nothing hides (the pieces
            before it double back up). None: :data:`~distconv.sync.mpi.pieces.LAST_PIECE_BYTES`
            with the communication thread, ``piece_bytes`` without; ignored where the last
            bucket cannot stream (see :func:`~distconv.sync.mpi.buckets.build_buckets`).
        stream: a piece goes as soon as its gradients are in (default), to the wire or to the
            communication thread; False: once its whole bucket is.
        timeout: seconds a blocking MPI call may wait for the other ranks before the job stops
            naming it (:mod:`~distconv.sync.mpi.watchdog`; default 600); None: for ever.
        poll_seconds: with the thread, the sleep between tests of a request while backward
            runs; 0 waits in ``MPI_Wait``; None: 0 where the usable cores
            (:func:`~distconv.cores.usable_cores`) the ranks' compute leaves (their kernel
            threads, one each on a GPU) hold one for each rank on the node, else
            :data:`~distconv.sync.mpi.comm.POLL_SECONDS`.
        grad_hook: ``grad_hook(params, examples)``, called once a step on every rank once every
            bucket is reduced (and copied back) and the used-parameter flags are in, before the
            first update: ``params`` the parameters about to be updated (those that fired on
            some rank), whose ``.grad`` hold what the optimizer reads (the sums over every
            rank's examples; averages where the buckets average themselves: a ``grad_dtype``
            cast, or 16-bit gradients), ``examples`` what they divide by to give the means
            (the step's global example count; 1 for averages: :func:`~.hook.mean_divisor`). It
            may change the gradients in place (never rebind ``p.grad``): a global-norm clip
            across ranks.
            Where it raises, no parameter is updated and the step fails on this rank alone, as
            a failed update does. With it, one rank with the thread no longer updates each
            bucket as soon as it is reduced. Buckets of sums beside averages (parameters of
            several dtypes) are refused at setup, alike on every rank
            (:class:`~.hook.HookRefused`: a failed setup, which close leaves), and at a
            ``start_step`` after a parameter was cast (nothing open, close leaves). Setup's job
            check compares the hook (:func:`~.hook.hook_description`): ranks given different
            ones are refused there, naming what differs.

    Attributes:
        state: optimizer state per parameter name, identical on every rank.
        buckets: the current bucket layout.
        piece_sizes: first, full-size and last piece bytes (those not given decided with the
            layout: :func:`~distconv.sync.mpi.pieces.piece_sizes`).
        wire_bytes: bytes this rank has handed to the gradient collectives so far.
        step: the step under way, or the next, counted from 0 as the run counts them
            (``start_at``: :mod:`~distconv.sync.mpi.numbering`).
    """

    fired_gradients_untouched = True  # MPI writes the buckets' buffers, not p.grad's array

    def __init__(
        self,
        optimizer: Optimizer,
        *,
        comm: Any = None,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        grad_dtype: str | None = None,
        overlap: bool | None = None,
        first_piece_bytes: int | None = None,
        piece_bytes: int | None = None,
        last_piece_bytes: int | None = None,
        poll_seconds: float | None = None,
        stream: bool = True,
        timeout: float | None = DEFAULT_TIMEOUT,
        grad_hook: Callable[[list[Parameter], int], None] | None = None,
    ) -> None:
        super().__init__(optimizer)
        if grad_hook is not None and not callable(grad_hook):
            raise TypeError(f"grad_hook must be callable or None, got {grad_hook!r}")
        self.grad_hook = grad_hook
        self.poll_seconds = check_poll_seconds(poll_seconds)
        # Python ints from here on: the job description compares them as JSON
        bucket_bytes, piece_bytes = check_sizes(  # type: ignore[assignment]
            ["bucket_bytes"], bucket_bytes=bucket_bytes, piece_bytes=piece_bytes
        )
        first_piece_bytes, last_piece_bytes = check_sizes(
            first_piece_bytes=first_piece_bytes, last_piece_bytes=last_piece_bytes
        )
        self.piece_sizes = self._pieces_asked = (first_piece_bytes, piece_bytes, last_piece_bytes)
        self._wire = wire_dtype(grad_dtype)
        self.timeout, self.stream = check_timeout(timeout), stream
        self.mpi = import_mpi() if comm is None or not isinstance(comm, SingleRankComm) else None
        if comm is None:
            comm = job_world(self.mpi)
        mpi = self.mpi  # MPI.IN_PLACE and MPI.SUM; None and None for SingleRankComm
        self._in_place, self._op = (mpi.IN_PLACE, mpi.SUM) if mpi is not None else (None, None)
        self.rank, self.world_size = comm.Get_rank(), comm.Get_size()
        self.comm, self._watchdog = watch(comm, self.rank, mpi, self.timeout)
        self.bucket_bytes, self.grad_dtype, self.overlap = bucket_bytes, grad_dtype, overlap
        self._overlap_asked = overlap  # each setup decides anew (self.overlap: the decision)
        self.buckets: list[Bucket] = []
        self.wire_bytes, self.sync_seconds, self.step = 0, 0.0, 0
        self._grad_comm: Any = None
        self._thread: CommThread | None = None
        self._slot: dict[str, Slot] = {}
        self._stamp = 0  # a new number each step: a slot stamped with it has fired
        self._layout_order: list[str] = []
        self._laid_from: tuple[str, ...] | None = None
        self._first_pass: list[str] = []  # the names in the order the first step fired them
        self._recorded: tuple[str, ...] = ()  # the first pass's firing order
        self._next_launch, self._total, self._in_step, self._matched = 0, 0, False, False
        self._lr_next: float | None = None  # a rate set inside a step: the next one's
        self._lr_posted = 0.0  # the rate the step under way posted in its check (and trains at)
        self._check_refused = False  # the step's check failed (abandon_step counts it not)
        self._ended_alike = False  # the step failed, every collective of it in (Shutdown)
        self._abandoned: PiecePump | None = None  # its wire (and buckets), for setup
        #: setup or the step under way until its last collective (see clean_leave.why_not_leave)
        self._open: str | None = NEVER_SET_UP
        #: a setup every rank refused (JobMismatch), until one succeeds: start_step names it
        self._failed_setup: str | None = None
        self._pump: PiecePump | None = None
        self._at_pack: list[tuple[int, ...]] = []
        self._check = StepCheck(self.comm)
        self._used = UsedParams(self.comm, 0, None)
        # one rank's uncaught exception aborts the job instead of leaving the others hanging
        self._restore_hook = install_abort_hook(comm) if self.world_size > 1 else lambda: None

    # -- start-up ---------------------------------------------------------------------------
    @held  # a blocking wait is no more interruptible without it: a stuck peer is the watchdog's
    def setup(
        self,
        params: Sequence[Parameter],
        config: Mapping[str, Any] | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Check the job on every rank, broadcast rank 0's parameters and state, lay out buckets.

        ``state`` (a checkpoint's optimizer state) is given on rank 0 alone; the broadcast hands
        it to every other rank. A step left open, not abandoned, is let go of first (as
        :meth:`abandon_step` does); a Ctrl-C it kept at ``start_step`` is raised once this
        rank has set up as the others do (a KeyboardInterrupt), not dropped; so is a Ctrl-C
        anywhere in it (held): raised between two of its exchanges (the job check and the
        broadcast, the broadcast and the gradients' ``Comm.Dup``), it left the other ranks
        waiting in the next, and this rank's setup unfinished, which its close aborted.
        """
        self.check_made()  # before its own fields: the base's setup, called below, checks late
        part = self.applied_in_part  # said once set up, where rank 0's are taken as they are
        wire = {"sync.bucket_bytes": self.bucket_bytes, "sync.grad_dtype": self.grad_dtype}
        wire["sync.piece_bytes"], wire["sync.stream"] = list(self._pieces_asked), self.stream
        params, wire["sync.device"] = taken_once(params)  # the ranks' optimizers round alike
        if self.grad_hook is not None:  # ranks given different hooks drift apart: refused
            try:
                wire["sync.grad_hook"] = hook_description(self.grad_hook, self)
            except Exception as exc:  # its describe(): raised in setup's guard, others told
                params = Raising(exc)
        # the parameters' (and which they are: the base setup takes the list before its job
        # check) as they are: kept if the job check fails
        kept = self._begin_setup()
        try:
            super().setup(params, {**(config or {}), **wire}, state)
        except Exception as exc:  # where every rank failed alike, in the job check, nobody
            self._failed_alike(exc, kept)  # waits and nothing changed (a broadcast between
            raise  # steps is the last good setup's), but no step runs
        self._close_gradients()  # a second setup's (a second fit): new ones, laid out afresh
        self._grad_comm = duplicate(self.comm, "gradients")
        on_gpu = any(is_gpu_array(p.value) for p in self.params)
        asked = self._overlap_asked
        seconds = thread_poll_seconds(asked, self.comm, self.mpi, on_gpu, self.poll_seconds)
        self.overlap = seconds is not None
        if self.overlap:
            self._thread = CommThread(self._reduce, seconds, self.timeout)
        self._lay_out([p.name for p in reversed(self.params)], again=True)
        try:  # alike on every rank (the job check compared dtypes and wire), none waiting
            refuse_mixed_layout(self.grad_hook, self.buckets)
        except Exception as exc:  # left as a failed job check leaves it: no step, close leaves
            self._failed_alike(exc, kept)
            self._check.raise_kept()  # a Ctrl-C the step let go of had kept: the user's first
            raise
        self._open = self._changed_in = self._failed_setup = None
        mark_set_up(self)  # done, alike on every rank: a Ctrl-C raised after it steps on
        if part is not None and state is None and self.is_chief:  # every rank's now: said
            say_setup_takes_part(type(self).__name__, part)
        # a Ctrl-C kept by the step this setup let go of unabandoned: raised, every rank set up
        self._check.raise_kept()

    @property
    def applied_in_part(self) -> str | None:
        """How the parameters hold a step applied in part where its update began on this rank
        and did not complete (an optimizer's error in ``finish_step``: :meth:`state_dict`
        refuses it), until the next setup; None where they hold a whole step."""
        if self._changed_in in (None, SETUP_OPEN) or not self.params:
            return None
        return (
            "its update began on this rank and did not complete: the buckets before the "
            "failed update are updated, the later ones not"
        )

    def set_lr_scale(self, factor: float) -> None:
        """:meth:`~distconv.sync.base.SyncStrategy.set_lr_scale`, from the next step on, where
        it is called inside a step too (after :meth:`start_step`: in forward, in backward).
        The ranks compare the rate :meth:`start_step` posts, and the update, in
        :meth:`finish_step`, read the optimizer's rate then: a factor set in between (this
        rank's own, from its loss) trained the step at a rate no rank compared, and the ranks'
        weights parted without a word. It is kept for the next step, whose check compares it."""
        super().set_lr_scale(factor)  # refused alike (NaN, negative) inside a step too
        self._lr_next = None  # a factor set again in the step: the last one is the next step's
        if self._in_step:
            self._keep_rate_for_next_step()

    def _keep_rate_for_next_step(self) -> None:
        """Inside a step: a working rate other than the posted one (a factor, a base rate set
        since :meth:`start_step`) is the next step's; this one trains at the posted rate."""
        if self.optimizer.lr != self._lr_posted:
            self._lr_next, self.optimizer.lr = self.optimizer.lr, self._lr_posted

    def finish_step(self) -> None:
        """:meth:`~.finishing.Finishing.finish_step` at the rate :meth:`start_step` posted: a
        rate changed inside the step otherwise than by :meth:`set_lr_scale`
        (``optimizer.set_base_lr`` in forward, or ``optimizer.lr`` assigned) is kept for the
        next step as a factor is, so the ranks' check compares what each update trains at (it
        trained this step at a rate no rank compared: one rank's parted the weights silently).
        Once the step's update is done, the optimizer holds the next step's rate
        (:meth:`_take_next_rate`)."""
        if self._in_step:
            self._keep_rate_for_next_step()
        super().finish_step()
        self._take_next_rate()  # where the step failed, abandon_step's _let_go does

    def _take_next_rate(self) -> None:
        """The step is over (its update done, or the step let go of): the optimizer holds the
        rate kept for the next step, if any, so that between steps ``lr`` is what the schedule
        and ``set_base_lr`` made (a fit's start reads it, and warns of a rate set otherwise).
        No update of the step reads ``optimizer.lr`` after it: they all run inside
        ``finish_step``, on this thread (the communication thread only reduces)."""
        if self._lr_next is not None:
            self.optimizer.lr, self._lr_next = self._lr_next, None

    # -- one step ---------------------------------------------------------------------------
    def start_step(self, examples: int) -> None:
        """Start checking that every rank is at this step with this layout (see
        :meth:`~.check_completion.CheckCompletion._complete_check`) and summing the examples."""
        if self._failed_setup is not None:  # else a step on the last layout, or none at all
            raise SyncError(f"start_step after {self._failed_setup}: {AFTER_FAILED_SETUP}")
        if self._grad_comm is None:
            raise SyncError("MPISync.start_step called before setup")
        if self._in_step:  # complete the pending check first: no request is ever left behind
            self._complete_check()
            raise SyncError(
                f"start_step called while step {self.step} is unfinished: call finish_step first"
            )
        if self._open is not None:  # failed: the ranks' parameters and collectives may differ
            self._tell_failed_step()
            raise SyncError(f"start_step after {self._open}: {WAYS_ON}")
        SyncStrategy.start_step(self, examples)  # not LocalSync's: the step is ours (_in_step)
        order = self.firing_order or self._recorded  # tuples, replaced, never changed
        if grads_moved(self.buckets, self.params):  # frozen, unfrozen or cast since built
            self._lay_out(order or self._laid_from, again=True)
        elif order and order is not self._laid_from:  # not checked name by name each step
            self._lay_out(order)
        # a cast since setup, alike on every rank (else a rank's check meets its close): before
        # the check is posted, nothing open, so close leaves (in finish_step: the step open)
        refuse_mixed_layout(self.grad_hook, self.buckets)
        for b in self.buckets:
            b.reset()
        self._first_pass, self._next_launch = [], 0
        self._matched = self._check_refused = self._ended_alike = False  # nothing met yet
        self._number_step()  # the run's, as start_at told: after the refusals above
        self._watchdog.phase = f"step {self.step}"
        self._stamp += 1
        self._used.reset()
        if self._pump is not None:
            self._pump.reset()
        if self._thread is not None:
            self._thread.relax()
        # the check last, then stores alone (no call: no Ctrl-C raised) until the step is open:
        # a Ctrl-C between left the check posted and no step (close met it: an abort)
        self._take_next_rate()  # set in the last step, after its check: this one's
        try:
            lr = self._lr_posted = self.optimizer.lr  # every rank's the same bits (rate_agreement)
            self._check.post(self.step, self._layout, self._layout_hash, self._examples, lr)
        except KeyboardInterrupt as exc:  # once the post returned: kept as one in it
            self._check.keep(exc)  # raised where nothing started
        self._in_step, self._open = True, open_step(self.step)

    def traffic(self) -> dict[str, float]:
        """Bytes given to the gradient collectives (sent and received alike), ``sync_seconds``
        (the time the step's exchange waited: its check in backward and finish_step; see
        :mod:`~distconv.sync.mpi.check_completion`), and the Trainer's waits between steps
        (``collective_seconds``)."""
        wire, seconds = self.wire_bytes, self.sync_seconds
        own = {"bytes_pushed": wire, "bytes_pulled": wire, "sync_seconds": seconds}
        return {**own, **super().traffic()}
