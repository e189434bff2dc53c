"""The sync contract: the only door between the Trainer and a transport.

A :class:`SyncStrategy` owns everything that differs between one process, a parameter server and
allreduce: who this process is (rank, world size, chief), how every rank starts with identical
parameters, what happens to a gradient the moment it is complete (the ``inc_update`` callback),
where the optimizer runs and where its state lives, and how small metrics are reduced. The
Trainer calls only the methods below and never reaches inside (Horovod's
``DistributedOptimizer`` + ``broadcast_parameters`` and ChainerMN's communicator are the models).

One step, as the Trainer drives it::

    sync.start_step(examples)        # this rank's examples in the whole step (all passes)
    for each of the K passes:        # K = gradient accumulation, usually 1
        sync.prefetch(network.rows_needed(batch))   # if fetches_rows and sparse_rows exist
        network.forward(batch)
        network.backward(sync if last pass else no-op, loss_scale=len(batch))
    sync.finish_step()               # every parameter now holds its updated value; a
                                     # parameter server's sparse table, in the rows this
                                     # rank read (whole again at refresh_parameters)
                                     # (sync.abandon_step() instead where the step raised)

Gradients arrive as **sums over this rank's examples**: the mean loss is seeded with the count
of the rows it is a mean over (the pass's examples; the tokens of a sequence batch under a
per-token loss). The strategy sums them over ranks and divides by the step's global count, so N
ranks with batch b and one rank with batch N*b take the same step, uneven last batches included.

Ownership of ``param.grad``: from the callback until :meth:`finish_step` returns, ``param.grad``
belongs to the strategy, which may be reading it on a communication thread (or may have handed
out the array as a view into a bucket buffer). Nobody else writes it in that window: a
strategy whose class says ``fired_gradients_untouched = True`` (the shipped three) gets each
fired numpy gradient read-only until its step ends (:mod:`distconv.held_gradients`), and the
close of a sync a write there failed raises a :class:`SyncError` naming the parameter. Change
gradients inside a strategy instead (``MPISync(grad_hook=...)``, a subclass). When
:meth:`finish_step` returns, every gradient is zero again and belongs to the layers.

A sync is a context manager: ``with LocalSync(opt) as sync:`` closes it at the block's end,
the block's exception (if any) being what :func:`closing_error` sees.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any, TypeVar

from distconv.base_init import checks_base_init, class_statement_level, refuse_skipped_base_init
from distconv.kernels.shape import is_int
from distconv.optim import Optimizer
from distconv.parameter import Parameter, setup_params, trainable
from distconv.sync.closing import (  # noqa: F401
    NEEDS_OPEN,
    clear_step_record,
    closing_error,
    guard_closing,
    refuse_meeting_in_step,
    summing,
    take_gradient,
)
from distconv.sync.description import job_description
from distconv.sync.errors import SyncError, step_refusal  # noqa: F401  (transports import them from here)
from distconv.sync.one_process import refuse_one_process_collectives
from distconv.sync.setup_told import tell_setup_failed  # noqa: F401  (the Trainer's)
from distconv.sync.step_count import StepCount

#: optimizer state by parameter name, then state key (host or device arrays)
StateDict = dict[str, dict[str, Any]]


#: what a strategy's ``__init__`` must call, and why (:mod:`distconv.base_init`)
_BASE_CALL = (
    "super().__init__(optimizer, rank, world_size): a sync strategy holds its optimizer, rank "
    "and world size"
)
#: what ``SyncStrategy.__init__`` sets: reading one before it runs is the skipped base call
_BASE_FIELDS = frozenset({"optimizer", "rank", "world_size"})
#: suffix of a per-row copy of an optimizer scalar (``step`` -> ``step_per_row``), which a
#: parameter server saves for a ``sparse_rows`` table; a strategy holding it whole ignores it.
PER_ROW = "_per_row"


#: the strategy a with-block enters, typed as its own class (``typing.Self`` is 3.11's)
_Strategy = TypeVar("_Strategy", bound="SyncStrategy")


class SyncStrategy(StepCount, ABC):
    """What happens to each gradient, and everything the Trainer needs across ranks.

    Subclasses implement :meth:`on_gradient`, :meth:`finish_step`, :meth:`state_dict` and
    :meth:`load_state_dict` (abstract: a class lacking one cannot be made), make optimizer state
    in :meth:`init_state`, and override the collective methods (:meth:`broadcast_parameters`,
    :meth:`allreduce_sum`, :meth:`barrier`, :meth:`all_equal`) for their transport. The
    defaults are those of a single process, refused to a strategy of several ranks.

    Closed is closed, on every transport: after :meth:`close`, the calls in
    :data:`NEEDS_OPEN` raise :class:`SyncError` naming the call, and closing again does
    nothing. A subclass gets this for the methods it defines (:meth:`__init_subclass__` wraps
    them), so a transport never has to check by itself; its ``__init__`` must call this one
    (``super().__init__(optimizer, rank, world_size)``), or making it raises ``TypeError``.

    Args:
        optimizer: the update rule. Where it runs (here, or on the servers) is the strategy's
            business; the Trainer only scales its learning rate and saves its state through
            this interface. An :class:`~distconv.optim.Optimizer` (a name: ``TypeError``).
        rank: this process's rank in the job, an int (a numpy one becomes Python's), else
            ``ValueError``.
        world_size: how many training processes take part, an int.

    Attributes:
        params: the trainable parameters, after :meth:`setup`.
        firing_order: parameter names in the order the first backward pass fired them, as the
            Network recorded it (allreduce lays out its buckets from this).
        closed: whether :meth:`close` has run.
    """

    closed = False
    #: seconds the Trainer waited in this strategy's collectives between steps (its stop
    #: checks, metric sums, checkpoint barriers: :mod:`distconv.sync.collective_time`)
    collective_seconds = 0.0
    #: where a step was left applied in part (its first updates made, not its last: an error),
    #: how (LocalSync's and MPISync's words), until the next setup; None: the weights are whole
    applied_in_part: str | None = None
    #: a transport's own calls that a closed one refuses too, beside :data:`NEEDS_OPEN`
    also_needs_open: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        guard_closing(cls)
        call = cls.__call__  # its own, or a mixin's: a backward(sync) by hand calls it
        if all(call is not b.__call__ for b in cls.__bases__ if issubclass(b, SyncStrategy)):
            warnings.warn(
                f"{cls.__name__} overrides __call__, which the Trainer does not call: it hands "
                "each gradient to on_gradient(param), where that work belongs",
                stacklevel=class_statement_level(),
            )
        if "__init__" in vars(cls):
            cls.__init__ = checks_base_init(  # type: ignore[method-assign]
                cls.__init__, cls.__name__, "_examples", _BASE_CALL, _BASE_FIELDS
            )

    def __init__(self, optimizer: Optimizer, rank: int = 0, world_size: int = 1) -> None:
        if not isinstance(optimizer, Optimizer):  # a name failed at setup: "no attribute config"
            raise TypeError(
                f"{type(self).__name__} needs an Optimizer, got {type(optimizer).__name__} "
                f"{optimizer!r:.60}; make one with distconv.optim.create_optimizer(name, lr=...)"
            )
        counts = (rank, world_size)  # 1.5 of 2.5 was taken, and "1" a bare TypeError
        if not all(map(is_int, counts)) or not (world_size >= 1 and 0 <= rank < world_size):
            raise ValueError(
                f"need integers 0 <= rank < world_size, got rank {rank!r} of {world_size!r}"
            )
        self.optimizer, self.world_size = optimizer, int(world_size)
        self.rank = int(rank)  # numpy's as Python's: msgpack cannot pack an np.int64 rank
        self.params: list[Parameter] = []
        self.firing_order: list[str] = []
        self._examples, self._stepped = 0, False  # no start_step yet: step_examples has none
        #: ids of the parameters check_gradient took in the step under way; None outside one
        self._taken: set[int] | None = None
        self._known: tuple[list[Parameter], set[int]] = ([], set())  # check_gradient's
        #: what _taken held when the step's finish_step raised (its wrapper ended the step),
        #: until the abandon_step after it, the next start_step or setup; else None
        self._taken_unfinished: set[int] | None = None

    # -- identity ---------------------------------------------------------------------------
    @property
    def is_chief(self) -> bool:
        """Rank 0: the process that writes files and seeds the others."""
        return self.rank == 0

    # -- start-up ---------------------------------------------------------------------------
    def setup(
        self,
        params: Sequence[Parameter],
        config: Mapping[str, Any] | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Check that every rank runs the same job, then make every rank's parameters identical.

        Args:
            params: every trainable parameter, in the network's order.
            config: what must agree on every rank (batch size, seed, optimizer, data, ...);
                parameter names, shapes and dtypes are added here.
            state: optimizer state restored from a checkpoint, given on the chief only. The
                chief's parameter values (fresh or restored) and this state are what every
                rank starts from.

        Raises:
            SyncError: ranks (or servers) disagree; the message names the first difference.
                Raised alike on every rank (MPI's ``JobMismatch``) it changes nothing: meetings
                between steps serve the last good setup's job; a step needs one that succeeds.
            ValueError: two parameters of one name (one listed twice is taken once).
            TypeError: a strategy of several ranks leaves a collective to this class's one
                process's versions (:mod:`distconv.sync.one_process`).
        """
        self.check_made()
        refuse_one_process_collectives(self)  # all four, before any: not an epoch's end
        clear_step_record(self)  # a step left open, the last model's parameters
        self.params = setup_params(trainable(params))  # TypeError for an integer one
        self.all_equal(job_description(self.params, self.optimizer, config or {}))
        self.init_state()
        if state is not None:
            self.load_state_dict(state)
        self.broadcast_parameters()

    def fail_setup(self, error: BaseException) -> None:
        """Instead of :meth:`setup`, on a rank that cannot set up (``error``: a checkpoint refused
        on the chief alone): tell the other ranks, whose setup then raises an error naming this
        rank and ``error``, and return; the caller raises it. Default: nothing (one rank)."""

    def check_made(self) -> None:
        """Refuse a strategy whose base ``__init__`` never ran (a ``@dataclass`` one's does
        not call it): a TypeError naming the class, where the Trainer or ``setup`` takes it."""
        refuse_skipped_base_init(self, "_examples", _BASE_CALL)  # __init__'s marker too

    def init_state(self) -> None:
        """Create optimizer state for parameters that have none (a local optimizer's hook)."""

    def broadcast_parameters(self) -> None:
        """Make every rank's parameter values (and optimizer state) equal to rank 0's."""
        refuse_one_process_collectives(self, "broadcast_parameters")

    def set_firing_order(self, names: Sequence[str]) -> None:
        """The Network recorded the order in which the first pass fired the parameters."""
        self.firing_order = list(names)

    # -- one step -----------------------------------------------------------------------------
    #: whether :meth:`prefetch` does anything: the strategy keeps ``sparse_rows`` tables
    #: elsewhere and moves only the rows a batch reads (a parameter server). Only then does the
    #: Trainer work out those rows, which also needs every sparse table's ids to be a feed.
    fetches_rows = False

    def prefetch(self, rows_by_param: Mapping[str, Any]) -> None:
        """Make the rows the next forward reads current, before it runs.

        When :attr:`fetches_rows`, the Trainer calls it before every forward (training and
        evaluation) of a model with ``sparse_rows`` parameters, after :meth:`start_step` in a step.
        A strategy holding parameters whole (local, allreduce) has them current: this default does
        nothing. A parameter server pulls just these rows, and after a step's backward pushes every
        row prefetched in the step and, of those prefetched while no step was open since the last
        :meth:`start_step`, the ones the backward wrote: those its layers noted writing
        (:mod:`~distconv.layers.written_rows`), or, for a parameter some user wrote without noting,
        those with a nonzero gradient. A gradient found in a row prefetched neither way is refused,
        naming the rank, the table and this call (the forward read stale rows); one in a row a layer
        wrote but did not note is not found: it is held back unpushed (that module).

        Args:
            rows_by_param: sparse parameter name -> row ids (any order, repeats allowed), as
                :meth:`~distconv.network.Network.rows_needed` gives them.
        """

    @abstractmethod
    def on_gradient(self, param: Parameter) -> None:
        """The ``inc_update`` callback: ``param.grad`` holds this rank's complete gradient sum."""

    def __call__(self, param: Parameter) -> None:
        self.on_gradient(param)

    def check_gradient(self, param: Parameter) -> None:
        """Refuse ``param``'s gradient out of the step's order, in the words of LocalSync,
        MPISync and the parameter server's worker: after :meth:`close`, outside
        :meth:`start_step` ... :meth:`finish_step` (or :meth:`abandon_step`), a second time in
        the step, or a parameter not given to :meth:`setup`. A strategy of one's own calls it
        first in :meth:`on_gradient` (the base does not: that runs for every gradient).

        Raises:
            SyncError: naming the parameter and the rule; nothing is taken.
        """
        take_gradient(self, param)

    @abstractmethod
    def finish_step(self) -> None:
        """Wait for what is in flight; afterwards every parameter is updated, gradients zero.

        A parameter's ``value`` may then be a new array (a strategy may adopt the buffer it
        received): read it through the parameter each step, never keep ``w = p.value``."""

    def abandon_step(self) -> None:
        """The step :meth:`start_step` began will not finish: a layer, or this strategy, raised
        in it (the Trainer calls this, then lets the error go on). Let go of what was kept for
        the step alone, so that calls outside a step (an evaluation's :meth:`prefetch`) are
        served as such until the next step; gradients and values wait for the next
        :meth:`setup`, which every ``fit`` calls. Must not raise, but for a Ctrl-C kept from a
        collective's start (MPISync), raised once all is let go. Default: nothing kept. A step
        abandoned after its first update and before its last leaves LocalSync and MPISync
        refusing :meth:`state_dict` and :meth:`start_step` until a :meth:`setup` succeeds."""

    # -- optimizer ----------------------------------------------------------------------------
    def set_lr_scale(self, factor: float) -> None:
        """Train at ``base_lr * factor`` from the next step on (a schedule's value).

        Raises:
            ValueError: ``factor`` is not a finite number >= 0 (NaN made every weight NaN at
                the next step, a negative one climbed the loss, both without a word).
        """
        if isinstance(factor, bool) or not isinstance(factor, Real) or not 0 <= factor < math.inf:
            raise ValueError(f"set_lr_scale: factor must be a finite number >= 0, got {factor!r}")
        self.optimizer.scale_lr(factor)

    def optimizer_config(self) -> dict[str, Any]:
        """The optimizer's name and hyperparameters (what checkpoints record)."""
        return self.optimizer.config()

    @abstractmethod
    def state_dict(self) -> StateDict:
        """The optimizer state of every parameter, by name then key (gathered if remote): on the
        chief alone for a checkpoint (not a collective); refused as :meth:`abandon_step` says."""

    @abstractmethod
    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace the optimizer state (on every rank, or on the servers), before training."""

    def refresh_parameters(self) -> None:
        """Make this rank's parameters the current ones: every rank's at an epoch's end or a
        stop, once all its steps are in (the model the epoch's evaluation and ``fit`` use, and a
        second ``fit`` seeds), and the chief's in :meth:`checkpoint_state`. Ranks that end each
        step identical have nothing to do (this default); an asynchronous parameter server's
        workers hold the values of their last replies, which other workers moved on: they pull.
        A synchronous parameter server's workers but the chief hold their ``sparse_rows``
        tables current only in the rows they read (a step's reply carries those): they pull
        the tables whole, where a step ran since their last pull. A loop of your own reads a
        table between steps only through :meth:`prefetch`, or after this call."""

    def checkpoint_state(self) -> StateDict:
        """:meth:`state_dict` with the parameters made current, of one moment: what the chief's
        checkpoint writes (on the chief alone). Default: :meth:`refresh_parameters`, then
        :meth:`state_dict`; an async parameter server moves the values once (one ``get_state``)."""
        self.refresh_parameters()
        return self.state_dict()

    def save_remote_parts(self, step: int, keep: int | None = None) -> dict[str, str]:
        """Have remote holders of state (parameter-server shards) write their part of the
        checkpoint of ``step``; returns part name -> where each was written, once every holder
        acknowledged. The chief calls it; a strategy that holds everything locally returns {}.

        Args:
            step: the checkpoint's step.
            keep: how many parts each holder keeps (the chief's ``--keep-checkpoints``), or
                None for the holders' own setting.
        """
        return {}

    def traffic(self) -> dict[str, float]:
        """Running totals for monitoring (``/metrics``), those it keeps: ``bytes_pushed``,
        ``bytes_pulled``, ``sync_seconds`` (the time the step's exchange waited:
        ``finish_step``'s, and under MPI also the step check's in backward), ``stale_dropped``
        (gradients dropped as too stale, one per parameter and shard), an async parameter
        server's ``push_messages_applied`` and ``push_messages_dropped`` (as its shards count),
        and ``collective_seconds`` (:attr:`collective_seconds`), which this default reports
        where there are several ranks (a rank alone waits for none: its counts stay empty)."""
        return {"collective_seconds": self.collective_seconds} if self.world_size > 1 else {}

    # -- collectives --------------------------------------------------------------------------
    def allreduce_sum(self, values: Sequence[float]) -> list[float]:
        """Sum small metrics (loss sums, correct answers, examples) over every rank; refused
        inside an open step, as every transport refuses it (its metrics, and a checkpoint
        written after them, would be of a step half taken)."""
        refuse_one_process_collectives(self, "allreduce_sum")
        refuse_meeting_in_step(self, summing(len(values)))
        return [float(v) for v in values]

    def barrier(self) -> None:
        """Return once every rank has called it; refused inside an open step."""
        refuse_one_process_collectives(self, "barrier")
        refuse_meeting_in_step(self, "at the barrier")

    def all_equal(self, description: Mapping[str, Any]) -> None:
        """Stop every rank unless all hold the same ``description``.

        Raises:
            JobRefused: naming the first key whose value differs, and the ranks' values (one
                line and exit 1 under ``run_main``; a plain SyncError keeps its traceback)."""
        refuse_one_process_collectives(self, "all_equal")

    def __enter__(self: _Strategy) -> _Strategy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """:meth:`close`, seeing the block's exception as propagating (:func:`closing_error`:
        MPI aborts the job rather than leave the other ranks waiting); it goes on."""
        self.close()

    def close(self) -> None:
        """Release sockets, communicators and threads.

        A step under way ends with it, unfinished: a gradient handed in after it is refused
        (:class:`SyncError`) and updates nothing. Where no exception propagates, that is a
        :class:`SyncError` too, raised on every transport once all is released (the step's
        update is not complete: call ``finish_step`` first, ``abandon_step`` where it raised).
        A write into a gradient held read-only propagating becomes a :class:`SyncError` naming
        the parameter (:func:`~distconv.held_gradients.blamed_write`).

        Whoever built the strategy closes it, in a ``finally`` (``distconv.job.train`` does).
        An exception propagating then (:func:`closing_error`) is a failure the other ranks
        must learn of: a transport may abort them (MPI) or tell its servers why (parameter
        server), so close outside an ``except`` clause a failure that was handled."""


guard_closing(SyncStrategy)
