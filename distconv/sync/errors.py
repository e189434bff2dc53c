"""A sync's error (:class:`SyncError`), its narrower :class:`JobRefused` (the ranks run
different jobs, or a shard refused this job), and its words for a gradient out of the step's
order, which every transport raises: the public ``distconv.sync.SyncError`` and
``distconv.sync.JobRefused``."""

from __future__ import annotations


class SyncError(RuntimeError):
    """Ranks disagree, a peer is gone, or the strategy was used out of order.

    The message names the cause: the first field that differs between ranks, the rank that
    stopped answering, or the call that came too early."""


class JobRefused(SyncError):
    """The job as configured cannot go on: the ranks run different jobs, a shard refused this
    job, or a 16-bit gradient wire overflowed (every rank holds the same sums, so each refuses
    the same bucket, with or without the communication thread). The user's configuration is the
    cause (a batch size, a model, a setting unlike another rank's; a wire too narrow), not
    their code.

    :func:`distconv.distributed.run_main` ends a script on it with one line and exit 1, as
    ``distconv train`` does; any other :class:`SyncError` (often the sync API used out of
    order) keeps its traceback there. Under an MPI sync's abort hook, only a refusal
    :attr:`raised_alike` does: another (a strategy's or a script's own, maybe raised on one
    rank alone) goes to the hook, which aborts the job, as no rank may be left waiting."""

    #: True where every rank raises it alike, none left waiting in a collective for another
    #: (MPI's ``JobMismatch`` and ``WireRefused``): a rank may then leave without aborting
    raised_alike = False


def step_refusal(
    name: str,
    in_step: bool,
    known: bool = True,
    twice_in: str = "one step",
    whose: str = "",
    closed: bool = False,
) -> SyncError:
    """Why the gradient of parameter ``name`` is refused, in the words of every transport that
    checks the step's order: after ``close()`` (``closed``), outside a step, not given to setup
    (``known`` False; ``whose`` may add whose it was), or fired twice in ``twice_in``
    (``"one step"``, ``"step 3"``)."""
    if closed:  # "call start_step" would send the reader to a call the closed sync refuses
        return SyncError(f"gradient of {name!r} arrived after close(): make a new sync to go on")
    if not in_step:
        hint = "call start_step(examples) before backward, finish_step() after it"
        return SyncError(f"gradient of {name!r} arrived outside a step: {hint}")
    if not known:
        return SyncError(f"gradient of {name!r}, which was not given to setup{whose}")
    return SyncError(f"parameter {name!r} fired twice in {twice_in}")
