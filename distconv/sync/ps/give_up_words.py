"""What a worker says as it gives up a wait on its shards: at its limit (``GRACE`` x its
``--timeout``, :func:`no_answer_text`), and once a stop was asked and a shard stayed silent
past the stop's patience (:func:`given_up_after_stop`). The wait itself is
:class:`~distconv.sync.ps.channel.ShardChannel`'s; its words are here, beside each other.
"""

from __future__ import annotations

from decimal import Decimal

from distconv.shard_timeout import exact_text
from distconv.straggler_words import NO_ANSWER_WHY, seconds_text
from distconv.sync.ps.late_ranks import no_answer_words

#: why a stoppable wait's shard is silent, and what giving up leaves (a pull waits for no worker)
_A_STEP_GIVEN_UP = (
    "it waits for a worker that is gone (killed, out of memory) or stuck, or is gone itself; "
    "giving up the wait, the step left incomplete"
)
_GIVING_UP = {
    "pull": "a shard answers a pull at once, waiting for no worker, so it is gone or stuck; "
    "giving up the pull, this rank's parameters not all the shards' values",
    "get_state": "a shard answers stats and get_state at once, waiting for no worker, so it is "
    "gone or stuck; giving up the checkpoint",
}


def given_up_after_stop(what: str) -> str:
    """Why a shard that a stoppable wait for ``what`` (``pull``, ``step 3``) gave up on after a
    stop was silent, and what giving up leaves."""
    return _GIVING_UP.get(what, _A_STEP_GIVEN_UP)


def no_answer_text(
    rank: int, what: str, shards: str, limit: float, timeout: float, hint: str = ""
) -> str:
    """``rank 0: no answer to step 199 from pserver shard(s) 0 (host:port) within 15 s (1.5 x
    --timeout 10 s): the shard is gone, stopped or unreachable; raise --timeout if it is only
    slow``: how worker ``rank`` gives up its wait for ``what`` on ``shards`` (as the worker
    names them) after ``limit`` seconds, its ``timeout`` times the grace, both said: the
    operator gave ``--timeout`` and would otherwise read a number they never gave (``limit``
    in :func:`~distconv.straggler_words.seconds_text`'s form, which the launcher reads back;
    ``timeout`` as given: :func:`_as_given`). ``hint``, a likelier cause where the worker knows
    one (a shard that outwaits it, failed handshakes), replaces the generic why. The launcher
    reads these words back to blame the shard
    (:func:`distconv.straggler_words.unanswering_shards_in`)."""
    why = hint or f": {NO_ANSWER_WHY}"
    return (
        f"rank {rank}: {no_answer_words(what)}{shards} within {seconds_text(limit)} s "
        f"({limit / timeout:g} x --timeout {_as_given(timeout)} s){why}"
    )


def _as_given(seconds: float) -> str:
    """``seconds`` (a ``--timeout``) as it reads back exactly
    (:func:`~distconv.shard_timeout.exact_text`), but never in exponent form: ``0.00001`` and
    ``10000000000000000``, not ``1e-05`` and ``1e+16``, beside a wait said without one."""
    return format(Decimal(exact_text(seconds)), "f")
