"""A job whose update diverged (a NaN or infinity in its loss, its gradients' sum or its
weights): the words the ranks and the shards say it with, and whether the job trains
asynchronously, the one case where another attempt may not meet it again.

A synchronous job (sync parameter server, MPI allreduce, one process) computes the same values
on every attempt: each resumes from the same checkpoint and diverges at the same step, so the
launcher does not restart it (:attr:`launcher.failure.Failure.every_attempt`). Nor is one rank
to blame: every rank computed its part from the same diverged weights, and each stops on it
(:meth:`launcher.failure.Failure.describe` names none, as for ranks that run different jobs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: how each producer's words of a divergence begin: a sync shard's non-finite sum
#: (:data:`distconv.sync.ps.sums.DIVERGED`), a rank's loss check (:mod:`distconv.epoch_tally`),
#: a worker's check of a shard's reply (:mod:`distconv.sync.ps.inbox`)
DIVERGED_WORDS = (
    "the update diverged",
    "the loss became NaN or infinite",
    "non-finite values (NaN or inf) for parameter",
)
#: why a synchronous job's divergence is not restarted (the report's ``then``)
EVERY_ATTEMPT = (
    "the update diverged (a synchronous job computes the same values on every attempt), "
    "which every attempt would meet again at the same step"
)
#: the step a rank's error line names before the shard's words (``rank 0, step 3: pserver ...``)
_STEP = re.compile(r"\bstep (\d+): ")
_DIVERGED_AT = f"{DIVERGED_WORDS[0]} at step "


def divergence_in(lines: Sequence[str]) -> str | None:
    """The words of a divergence in the first of ``lines`` (a child's last words, its cause)
    that holds them, from their start (a rank's own prefix cut off): ``the update diverged at
    step 3 (a non-finite gradient of conv2.weight: ...)``, the step taken from the rank's
    prefix where the shard's words lack it; None where no line does."""
    for line in lines:
        found = [at for words in DIVERGED_WORDS if (at := line.find(words)) != -1]
        if not found:
            continue
        said = line[min(found) :]
        step = _STEP.search(line[: min(found)])
        if said.startswith(DIVERGED_WORDS[0]) and not said.startswith(_DIVERGED_AT) and step:
            said = f"{_DIVERGED_AT}{step[1]}{said[len(DIVERGED_WORDS[0]) :]}"
        return said
    return None


def trains_async(argvs: Sequence[Sequence[str]]) -> bool:
    """Whether a job whose children run ``argvs`` trains asynchronously: a parameter-server
    shard's ``--mode async`` (:func:`launcher.commands.server_command`; the launcher's own
    ``--mode``, which ``distconv train`` does not take)."""
    return any(_flag(argv, "--mode") == "async" for argv in argvs)


def _flag(argv: Sequence[str], name: str) -> str | None:
    """The value of ``name`` in ``argv`` (``--mode async`` or ``--mode=async``), the last given."""
    value = None
    for at, arg in enumerate(argv):
        if arg == name and at + 1 < len(argv):
            value = argv[at + 1]
        elif arg.startswith(f"{name}="):
            value = arg.partition("=")[2]
    return value
