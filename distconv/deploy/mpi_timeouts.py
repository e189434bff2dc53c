"""An MPIJob rank's two limits on a hang, in the order Kubernetes needs them.

A rank that waits in MPI for a peer that never comes has two clocks running. Its watchdog
stops the whole job after ``--timeout`` seconds (:mod:`distconv.sync.mpi.watchdog`, 600 by
default), with a message that names the call, the step and the rank that did not come. Its
``/healthz`` turns 503 after ``--stall-seconds`` without a step (300 by default), and the
worker pods' liveness probe then restarts its pod after three failures 30 s apart. With the
defaults the stall limit came first: Kubernetes restarted every worker pod, the waiting ranks'
too, 360 to 390 s into the hang, and the message that says why was never written.

So an MPIJob's ranks get a ``--timeout`` below their ``--stall-seconds``:
:func:`watchdog_args` renders one where the train arguments give none, and
:func:`order_problem` names a pair that is not so, for the renderer and for the checks of
edited manifests (:mod:`distconv.deploy.check_mpi`). ``/healthz`` itself is left as it is: a
waiting rank's pod restarted is no loss under MPI, where a job that lost a rank restarts whole
(the watchdog's ``MPI_Abort`` ends every rank).
"""

from __future__ import annotations

from collections.abc import Sequence

from distconv.deploy.train_values import TrainArgsError
from distconv.deploy.walk import _flag
from distconv.job import TrainConfig
from distconv.train_flag_types import positive_float

TIMEOUT = "--timeout"
STALL = "--stall-seconds"
#: where the train arguments give no --timeout, an MPIJob's ranks get this share of their stall
#: limit (240 s of the default 300 s). The rest, and the liveness probe's own failures after
#: it (60 s at least), cover what runs on a rank's stall clock before its wait begins (the
#: rest of its step) and the watchdog's once-a-second tick.
TIMEOUT_SHARE = 0.8


def watchdog_args(train: Sequence[str]) -> list[str]:
    """The flags an MPIJob's ranks get before ``train`` (their ``distconv train`` arguments,
    spelled out, values as the ranks take them): ``--stall-seconds`` with the default written
    out where ``train`` gives none, and ``--timeout`` at :data:`TIMEOUT_SHARE` of the stall
    limit where it gives none.

    Raises:
        TrainArgsError: ``train`` gives a ``--timeout`` that is not below the stall limit, or a
            stall limit with no number below it to render as the timeout.
    """
    timeout, stall = (_flag(list(train), flag, last=True) for flag in (TIMEOUT, STALL))
    limit = TrainConfig.stall_seconds if stall is None else positive_float(stall)
    if timeout is not None:
        problem = order_problem(positive_float(timeout), None if stall is None else limit)
        if problem is not None:
            raise TrainArgsError(f"{problem} (the train arguments after --)")
        return [] if stall is not None else [STALL, _written(limit)]
    share = float(_written(limit * TIMEOUT_SHARE))  # as the ranks read it back
    if not share < limit:  # the least float there is: its 4/5 rounds back up to it
        raise TrainArgsError(
            f"{STALL} {_written(limit)} leaves no {TIMEOUT} below it to render; give a larger "
            f"{STALL} (the train arguments after --)"
        )
    rendered = [TIMEOUT, _written(share)]
    return rendered if stall is not None else [STALL, _written(limit), *rendered]


def _written(seconds: float) -> str:
    """``seconds`` as a flag's value: 240, not 240.0; 1600000, not 1.6e+06."""
    return f"{seconds:.15g}"


def order_problem(timeout: float | None, stall: float | None) -> str | None:
    """Why an MPIJob's ranks with watchdog ``timeout`` and stall limit ``stall`` (None: the
    one a rank takes where the flag is not given) would be restarted by their pods' liveness
    probe before their watchdog names a hang; None where the timeout is below the limit."""
    if timeout is None:
        from distconv.sync.mpi.watchdog import DEFAULT_TIMEOUT  # loads with the MPI sync

        timeout, said_timeout = DEFAULT_TIMEOUT, f" ({DEFAULT_TIMEOUT:g}, the default)"
    else:
        said_timeout = f" {timeout:g}"
    default_stall = TrainConfig.stall_seconds
    said_stall = f" ({default_stall:g}, the default)" if stall is None else f" {stall:g}"
    stall = default_stall if stall is None else stall
    if timeout < stall:
        return None
    return (
        f"the ranks' {TIMEOUT}{said_timeout} is not below their {STALL}{said_stall}: a rank "
        "waiting for one that hung turns /healthz 503 first, and the worker pods' liveness "
        "restarts every pod before the watchdog's timeout names the rank and step; give "
        f"{TIMEOUT} below {STALL}"
    )
