"""The failure an attempt reports, once its children have ended and their tails are whole:
whom to blame for the first child that failed (a victim's named cause, :func:`~launcher.settle.
blamed`; the worker whose own signal stopped the ranks, :func:`~launcher.own_stop.
signalled_worker`; the shard a worker gave up on that never exited, :func:`unanswered_by`), the
job's error another child said (:func:`~launcher.job_error.said_elsewhere`), and the process the
attempt's stop found stopped (:func:`~launcher.stopped_blame.as_found`). Decided here once, the
restart line, ``restarts.jsonl``, ``failure.json``, the headline and the launcher's exit status
all say the same. :class:`launcher.supervisor.Supervisor`'s helper, apart from its loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .child import Child
from .divergence import trains_async
from .failure import Failure, last_words, signal_name
from .job_error import said_elsewhere
from .named_cause import unanswered_shard
from .own_stop import STOP_SIGNALS, checkpointed_stop, signalled_worker
from .settle import blamed, ended_by_stop
from .stopped_blame import as_found
from .stopped_processes import StopFindings


def attempt_failure(
    failed: Child,
    children: list[Child],
    outstayed: list[Child] | None,
    stopped: list[Child],
    findings: StopFindings,
    restart: int,
) -> Failure:
    """The report of attempt ``restart``, whose first failure was ``failed``: ``outstayed``,
    the workers a victim's settle may name (None where it did not end so), ``stopped``, the
    children running as the attempt's stop began, ``findings``, the processes that stop found
    stopped (a wait given up on one is laid on it: :func:`~launcher.stopped_blame.as_found`)."""
    return as_found(_first_blamed(failed, children, outstayed, stopped, restart), findings)


def _first_blamed(
    failed: Child,
    children: list[Child],
    outstayed: list[Child] | None,
    stopped: list[Child],
    restart: int,
) -> Failure:
    """The failure of attempt ``restart`` as its children's ends say it, before what its stop
    found is weighed (:func:`attempt_failure`'s arguments)."""
    if (shard := unanswered_by(failed, children, stopped, restart)) is not None:
        return shard
    named, by_stop = blamed(failed, outstayed, stopped)
    cause = signalled_worker(failed, children) if named is failed else named
    failure = cause.failure(restart, [c for c in children if c is not cause])
    failure = failure if named is failed else failure.outstayed(by_stop)
    said = said_elsewhere(children, stopped, restart)  # its victims' cause, stopped
    too = failed_too(cause, children, stopped)  # met the same error, or stopped on it
    return replace(
        failure, job_error_elsewhere=said, asynchronous=may_train_async(children), failed_too=too
    )


def may_train_async(children: list[Child]) -> bool:
    """Whether the job of ``children`` may train asynchronously, so that another attempt may
    not meet a divergence again: its shards' ``--mode async``
    (:func:`~launcher.divergence.trains_async`), or workers that run a program of their own
    and no shard of the launcher's (``local --servers 0``), whose program may name shards
    started apart, in either mode and keeping their state across restarts: not known to be
    synchronous, it is restarted as before; so is ``distconv train`` naming such shards
    (``--pservers`` after ``--``, which ``local --servers 0`` takes). ``distconv train``
    without shards trains alone (the launcher refuses several such workers), and mpi's ranks
    with allreduce."""
    shards = [c.spec.argv for c in children if c.spec.role == "server"]
    if shards:
        return trains_async(shards)
    return any(c.spec.role == "worker" and not _trains_alone(c.spec.argv) for c in children)


def _trains_alone(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a worker's ``python -m distconv train ...``
    (:func:`~launcher.commands.worker_command`) that names no shards of its own
    (``--pservers``, as train spells it out)."""
    from distconv.train_args import spelled_out

    if list(argv[1:4]) != ["-m", "distconv", "train"]:
        return False
    return not any(w.partition("=")[0] == "--pservers" for w in spelled_out(argv[4:], lenient=True))


def failed_too(cause: Child, children: list[Child], stopped: list[Child]) -> list[dict]:
    """The children besides ``cause`` that failed on their own (:meth:`Child.failed`), not as
    victims (75: :attr:`Failure.victims` has them) nor by the launcher's stop (in ``stopped``,
    ended by it: :func:`~launcher.settle.ended_by_stop`) nor by a stop signal from outside
    (:func:`_signalled_to_stop`), as ``failure.json`` lists them, each
    with its last words: whether they met the same error or stopped on the failure, an
    operator reads there, not in each log."""
    return [
        {
            "role": c.spec.role,
            "rank": c.spec.rank,
            "exit_code": code if (code := c.poll() or 0) > 0 else None,
            "signal": signal_name(-code) if code < 0 else None,
            "log": str(c.log_path),
            "said": (last_words(list(c.tail)) or [None])[-1],
        }
        for c in children
        if c is not cause
        and c.failed()
        and not c.victim
        and not ended_by_stop(c, stopped)
        and not _signalled_to_stop(c)
    ]


def _signalled_to_stop(child: Child) -> bool:
    """Whether ``child`` ended on a stop signal from outside: killed by SIGTERM or SIGINT, or
    stopped with a checkpoint as its stop line says (:func:`~launcher.own_stop.checkpointed_stop`,
    the launcher's one rule for it). A bare exit 143 or 130, without that line, is a program's
    own status, and a failure like any other: it stays in ``failed_too``."""
    status = child.poll()
    if status in STOP_SIGNALS:
        return True
    return checkpointed_stop(child.spec.role, status, child.tail) is not None


def unanswered_by(
    failed: Child, children: list[Child], stopped: list[Child], restart: int
) -> Failure | None:
    """Where ``failed`` is a worker whose last words say that a shard never answered it
    (:func:`~launcher.named_cause.unanswered_shard`) and that shard had not exited as the stop
    began (in ``stopped``: stopped, hung or cut off, it would not exit by itself), that shard's
    failure, named (:meth:`~launcher.failure.Failure.outstayed`): its cause the workers that
    gave up on it and the first one's words. None otherwise: a shard that exited is the
    failure the supervisor saw, or no cause at all."""
    if failed.spec.role != "worker":
        return None
    if (said := unanswered_shard(last_words(list(failed.tail)))) is None:
        return None
    shard = next((c for c in stopped if c.spec.role == "server" and c.spec.rank == said[0]), None)
    if shard is None:
        return None
    gave_up = [c for c in children if c.spec.role == "worker" and _gave_up_on(c, said[0])]
    names = ", ".join(f"worker {c.spec.rank}" for c in gave_up)
    failure = shard.failure(restart, [c for c in children if c is not shard])
    failure = replace(failure, cause=f"{names} gave up on it: {said[1]}")
    return failure.outstayed(ended_by_stop(shard, stopped))


def _gave_up_on(worker: Child, shard: int) -> bool:
    """Whether ``worker``'s last words say that shard ``shard`` never answered it."""
    said = unanswered_shard(last_words(list(worker.tail)))
    return said is not None and said[0] == shard
