"""Does a sync transport train as one process does? The float64 check of a transport.

Data-parallel training is right when N ranks, each with batch b, end with the weights one
process (``LocalSync``) ends with on batch N·b (docs/architecture.md, "One global batch"). This
module runs that check on a job small enough to take seconds and demanding enough to catch what
trains on silently: a float64 LeNet (convolutions through im2col, fully connected layers), Adam
(optimizer state) with a learning-rate decay (``set_lr_scale``), several epochs of fixed
synthetic data whose last step is uneven, all through the real :class:`~distconv.trainer.Trainer`
(each rank takes its stride of every global batch). Rank r builds its model from a seed of its
own, so the ranks start alike only if the strategy broadcasts rank 0's parameters.

- :func:`assert_matches_local` starts the ranks as processes of their own and compares each
  one's weights with the reference's and with each other's: the one call for a transport whose
  ranks need nothing but ``make_sync(optimizer, rank, world_size)``.
- :func:`assert_rank_matches_local` is one rank's share, for a transport that needs its own
  launcher: call it from a script each rank runs (``mpiexec -n 2 python -m mpi4py check.py``).
- :func:`reference_weights` and :func:`rank_weights` are the two runs it compares, and
  :func:`mismatch` (:mod:`distconv.weight_mismatch`) says where they differ.

A layer's author checks a model of their own the same way: ``Job(model=..., dataset=...)``
trains it, on data of their own, instead of the LeNet (see :class:`Job`). The job, its model and
data are in :mod:`distconv.equivalence_job`, importable from here too.

A job with ``restart_at`` (:data:`RESUMED_JOB`) stops mid-way, checkpointed, and resumes on new
syncs (:mod:`distconv.equivalence_restart`): it fails a transport that restores the optimizer
state wrongly, or on rank 0 only, which the plain check, its Adam state zeros, cannot see.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

import distconv  # annotations name types through it: get_type_hints imports them then

# the check's job, still importable from here, as the docs and the tests import it
from distconv.equivalence_job import CHECKPOINT_EVERY as CHECKPOINT_EVERY
from distconv.equivalence_job import JOB, Job, Weights, weights
from distconv.equivalence_job import RESUMED_JOB as RESUMED_JOB
from distconv.equivalence_job import model as model
from distconv.equivalence_job import training_data as training_data
from distconv.optim import Optimizer
from distconv.weight_mismatch import TOLERANCE, mismatch
from distconv.weight_mismatch import max_relative_difference as max_relative_difference

if TYPE_CHECKING:
    import distconv.sync


def reference_weights(world_size: int, job: Job = JOB) -> Weights:
    """One process, ``LocalSync``, batch ``world_size`` × ``job.batch_size``: the weights the
    job's ranks end with, to rounding."""
    from distconv.sync.local import LocalSync

    net, sync = job.model_of(0), LocalSync(job.make_optimizer())
    try:
        job.fit(net, sync, world_size * job.batch_size, world_size)
    finally:
        sync.close()
    return weights(net)


def rank_weights(
    sync: distconv.sync.SyncStrategy,
    job: Job = JOB,
    *,
    restart: Callable[[Optimizer], distconv.sync.SyncStrategy] | None = None,
    out_dir: str | os.PathLike | None = None,
) -> Weights:
    """This rank's share of the job through ``sync`` (its rank and world size say which
    share; batch ``job.batch_size``): the weights it ends with. ``sync`` is left open.

    With ``job.restart_at`` the rank stops there, checkpointing in ``out_dir`` (the same
    folder on every rank, holding no run: the chief writes it), and resumes through the sync
    ``restart(optimizer)`` makes (:func:`~distconv.equivalence_restart.restarted_weights`):
    ``sync`` is then closed at the stop, the new one at the end. A stop the process is asked
    for from outside (a scheduler's SIGTERM before the check's own, a Ctrl-C) raises its
    :class:`~distconv.resume.Preempted`, ``sync`` left open.

    Raises:
        ValueError: ``sync``'s optimizer is not the job's (``job.make_optimizer()``), so the
            reference would train another job; ``restart`` or ``out_dir`` given for a job
            without ``restart_at``, or missing for one with it.
    """
    refuse_other_optimizer(sync, job)
    if job.restart_at:
        from distconv.equivalence_restart import restarted_weights

        return restarted_weights(sync, job, restart, out_dir)
    if restart is not None or out_dir is not None:
        raise ValueError(
            "restart and out_dir are for a job that restarts: give it restart_at "
            "(RESUMED_JOB), or leave them out"
        )
    net = job.model_of(sync.rank)
    job.fit(net, sync, job.batch_size, sync.world_size)
    return weights(net)


def refuse_other_optimizer(sync: distconv.sync.SyncStrategy, job: Job) -> None:
    """Raise ``ValueError`` where ``sync``'s optimizer is not the job's: the reference would
    train another job."""
    theirs, ours = sync.optimizer_config(), job.make_optimizer().config()
    if theirs != ours:
        raise ValueError(f"the sync's optimizer is {theirs}, the check's {ours}: make it with "
                         "the optimizer the check hands over, or Job.make_optimizer()")  # fmt: skip


def assert_rank_matches_local(
    sync: distconv.sync.SyncStrategy,
    job: Job = JOB,
    tolerance: float = TOLERANCE,
    *,
    world_size: int | None = None,
    restart: Callable[[Optimizer], distconv.sync.SyncStrategy] | None = None,
    out_dir: str | os.PathLike | None = None,
) -> Weights:
    """:func:`rank_weights`, then raise ``AssertionError`` naming this rank and the parameter
    furthest from :func:`reference_weights` where one is beyond ``tolerance``; for a script
    each rank runs under the transport's own launcher, the sync made from
    ``job.make_optimizer()`` and closed by the caller. Returns this rank's weights.

    A job with ``restart_at`` (:data:`RESUMED_JOB`) stops there and resumes through
    ``restart(optimizer)``, a new sync of the same rank and world size (``sync`` closed at the
    stop), checkpointing in ``out_dir``, one folder for every rank: see :func:`rank_weights`.

    ``world_size`` is the number of ranks the launcher started: a sync of another world size
    fails before it trains. Left None, any world size of 2 or more is taken; a world of one
    asks for ``world_size=1``. Ranks that each made a world of their own (mpi4py built for
    another MPI than the ``mpiexec`` that started them) would otherwise each train alone, match
    a reference of one rank, and pass."""
    wanted = "2 or more" if world_size is None else str(world_size)
    if sync.world_size < 2 if world_size is None else sync.world_size != world_size:
        raise AssertionError(
            f"rank {sync.rank} of {sync.world_size}: the rank run expects {wanted} ranks, but "
            f"this rank's sync is in a world of {sync.world_size} (did its ranks meet?); pass "
            "world_size=N, the number of ranks started, to check another"
        )
    got = rank_weights(sync, job, restart=restart, out_dir=out_dir)
    wrong = mismatch(reference_weights(sync.world_size, job), got, tolerance)
    if wrong is not None:
        raise AssertionError(f"rank {sync.rank} of {sync.world_size}: {wrong} {_WHAT}")
    return got


#: what the reference is, for the messages
_WHAT = "(the reference: one process, LocalSync, the whole global batch a step)"


def assert_matches_local(
    make_sync: Callable[[Optimizer, int, int], distconv.sync.SyncStrategy],
    world_size: int,
    job: Job = JOB,
    *,
    tolerance: float = TOLERANCE,
    timeout: float = 120.0,
    out_dir: str | os.PathLike | None = None,
) -> list[Weights]:
    """Run the job on ``world_size`` ranks, each a process of its own, and check that every
    rank ends with the reference's weights and with rank 0's, to ``tolerance``.

    Each rank's process (started by ``multiprocessing``'s spawn) calls
    ``make_sync(optimizer, rank, world_size)``, trains its share (:func:`rank_weights`) and
    closes the sync. A job with ``restart_at`` (:data:`RESUMED_JOB`) stops there, closes the
    sync, and resumes through a second ``make_sync`` and a model of other seeds, each rank
    checkpointing in ``out_dir`` (None: a temporary folder the call makes and removes).
    ``make_sync`` travels to the processes pickled, so it must be a module-level function or
    class, or a ``functools.partial`` of one over picklable arguments (endpoints, a folder to
    meet in); a script that calls this from its own code keeps that code under ``if __name__
    == "__main__":``, as spawn imports the script in each rank. Every process it started is
    gone when it returns or raises.

    Returns:
        Every rank's weights, in rank order.

    Raises:
        TypeError: ``make_sync``, ``job.model`` or ``job.dataset`` cannot be pickled (a
            lambda, a function defined inside another) or is not callable (named).
        ValueError: ``world_size`` is not an int >= 1, ``timeout`` not > 0, ``out_dir``
            given for a job without ``restart_at``, or a ``restart_at`` the ranks cannot stop
            at (see :class:`Job`).
        AssertionError: a rank's weights differ from the reference's or rank 0's (naming the
            rank, the parameter and the largest difference); a rank raised or exited before
            it sent its weights (naming it, its exit status and the end of its output); or
            ranks were still running after ``timeout`` seconds (killed, and named).
    """
    from distconv.rank_processes import check_picklable, run_ranks

    check_picklable(make_sync, "make_sync")
    for what in ("model", "dataset"):  # before any rank starts, not a failure in each
        if getattr(job, what) is not None:
            check_picklable(getattr(job, what), f"Job.{what}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if out_dir is not None and not job.restart_at:
        raise ValueError("out_dir is for a job that restarts: give it restart_at (RESUMED_JOB)")
    if job.restart_at:  # here, not in every rank after it trained the whole job
        from distconv.equivalence_restart import refuse_restart_at

        refuse_restart_at(job, world_size)
    with contextlib.ExitStack() as folder:
        if job.restart_at and out_dir is None:  # removed once every rank is gone
            out_dir = folder.enter_context(tempfile.TemporaryDirectory(prefix="distconv-check-"))
        ranks = run_ranks(
            _rank_main,
            [(make_sync, rank, world_size, job, out_dir) for rank in range(world_size)],
            lambda: reference_weights(world_size, job),
            timeout,
        )
    expected, got = ranks.meanwhile, ranks.results
    wrong = [(r, mismatch(expected, w, tolerance)) for r, w in enumerate(got)]
    wrong += [(r, mismatch(got[0], w, tolerance, "rank 0's")) for r, w in enumerate(got) if r]
    said = [f"rank {r} of {world_size}: {why}" for r, why in wrong if why is not None]
    if said:
        raise AssertionError("\n".join([*said, _WHAT]))
    return got


def _rank_main(
    make_sync: Callable[..., distconv.sync.SyncStrategy],
    rank: int,
    world: int,
    job: Job,
    out_dir: str | os.PathLike | None,
) -> Weights:
    """One rank's process: make its sync, train (stopping and resuming through a second
    ``make_sync`` where the job restarts), close it."""
    sync = make_sync(job.make_optimizer(), rank, world)
    restart = (lambda optimizer: make_sync(optimizer, rank, world)) if job.restart_at else None
    try:
        return rank_weights(sync, job, restart=restart, out_dir=out_dir)
    finally:
        sync.close()
