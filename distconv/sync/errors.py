"""A sync's error (:class:`SyncError`), its narrower :class:`JobRefused` (the ranks run
different jobs, or a shard refused this job), and its words for a gradient out of the step's
order, which every transport raises: the public ``distconv.sync.SyncError`` and
``distconv.sync.JobRefused``."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from distconv.rank_endings import (
    different_jobs_text,
    ending_name,
    meeting_failure_name,
    setup_failure_in_lines,
    setup_failure_name,
    told_failure_text,
)
from distconv.sync.rate_agreement import SAME_RATE


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

    def __init__(self, *args: object, told_of: int | None = None) -> None:
        super().__init__(*args)
        #: the rank whose failure (it could not set up, or make its ``all_equal``
        #: description) this refusal only tells of, where distconv itself made the words: its
        #: job check (:func:`job_refusal`) or a shard's refusal; None for any other, a
        #: script's own in those words included, which :func:`~distconv.sync.peers.told_failure`
        #: must not take for a victim's (the launcher then blamed the rank the text named).
        #: Kept through pickling and ``copy``, as an exception's ``__dict__`` is
        self.told_of = told_of


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


def setup_failure_description(
    rank: int, text: str, error: BaseException | None = None
) -> dict[str, str]:
    """The job description by which rank ``rank``, which cannot set up (``text``: its error,
    ``Type: message``), makes the job check all the same: every other rank's check fails on
    it, and says so in :func:`setup_failure_in`'s words, not as a difference of jobs.

    ``Type`` is said as the failing rank's one-line ending names ``error`` (by default the
    exception being handled: each caller describes the error it is handling), with
    :func:`~distconv.rank_endings.ending_name`: a script's own ``class BadRows(DataError)`` as
    ``DataError``. The launcher reads the others' ``rank 0 could not set up: DataError: ...``
    as an error of the job itself and does not restart it; by its own name it did, where that
    rank's own ending was never said (a cleanup slower than ``--settle``, ended by the
    launcher's stop)."""
    return {"name": setup_failure_name(rank, _as_ending_names(text, error))}


def _as_ending_names(text: str, error: BaseException | None) -> str:
    """``text`` (``Type: message``, ``Type``, ``Type (its text could not be made)``) with the
    class name it begins with as :func:`~distconv.rank_endings.ending_name` names ``error``
    (None: the exception being handled), where ``text`` begins with that error's own class
    name; else as it is."""
    error = sys.exc_info()[1] if error is None else error
    name = None if error is None else ending_name(error)
    own = type(error).__name__
    if name is None or name == own or not text.startswith(own):
        return text
    rest = text[len(own) :]
    return name + rest if rest[:1] in ("", ":", " ") else text


def meeting_failure_description(rank: int, text: str) -> dict[str, str]:
    """The description by which rank ``rank``, whose own at an ``all_equal`` meeting between
    steps cannot be written (``text``: its error), makes the meeting all the same: the others
    say ``rank 1 could not make its all_equal description: ...`` (:func:`setup_failure_in`),
    which the launcher reads as that rank's failure, not as the ranks' different jobs."""
    return {"name": meeting_failure_name(rank, text)}


def setup_failure_in(*descriptions: object) -> str | None:
    """``rank 0 could not set up: RunDirError: runs/x already holds a run``: what a rank whose
    job check failed says where one of ``descriptions`` (the other rank's, then its own) is a
    :func:`setup_failure_description` (its error alone, under ``name``: the others read it
    back); None where none is. The words are :mod:`distconv.rank_endings`', which the
    launcher reads back as that rank's failure. A difference of jobs ("name:
    '<missing>' here, 'setup failed on rank 0 ...' there") said what did not happen, and the
    launcher read it as the ranks' different jobs: no rank blamed, no restart."""
    for description in descriptions:
        if isinstance(description, Mapping) and list(description) == ["name"]:
            if said := told_failure_text(description["name"]):  # a meeting's too
                return said
    return None


#: where the ranks' descriptions first differ in their base rate (the optimizer's config)
RATE_KEY = "optimizer.lr"
#: where the ranks' descriptions first differ in the grad_hook (MPISync's job check): the hook's
#: public values are compared, so a value taken from the process refuses a correct job
HOOK_KEY = "config.sync.grad_hook"
HOOK_ADVICE = (
    " (a grad_hook's public values are compared across ranks: keep one meant to differ by rank, "
    "such as the rank it logs on, a start time or a pid, under a private name, _rank = rank, "
    "or give the hook a describe() that leaves it out)"
)


#: the keys of a hook's description that say which hook it is, not a value it holds
#: (:func:`~distconv.sync.mpi.hook.hook_description`): its function, first line, class
HOOK_IDENTITY = frozenset({"function", "line", "class"})


#: the entries of the Trainer's data check (:func:`distconv.data.data_facts`) that differ where
#: the ranks were handed other examples (a shard each, an unseeded shuffle): a set's length and
#: its sampled examples. Not its feeds (another name, example shape or dtype on one rank: a cast
#: or a feed of its own, which no seed or whole set mends), nor a test set one rank lacks
DATA_KEYS = tuple(
    f"{data}.{key}"
    for data in ("train_data", "test_data")
    for key in ("examples", "rows", "sampled_examples_sha256")  # rows: a sequence set's
)
DATA_ADVICE = (
    " (every rank must be handed the whole set, in the same order: the Trainer shuffles it and "
    "takes each rank's share itself; load it with a fixed seed, and do not shard it by rank)"
)


def with_advice(diff: str) -> str:
    """``diff`` (a first difference of two jobs' descriptions), with how to go on where what
    differs is the data the ranks were handed (the rule a script broke: a shuffle of its own
    unseeded, a shard per rank; ``train_data.sampled_examples_sha256: '9d41...' here, ...``
    said neither), or a value the grad_hook holds: its words alone named a setting the user may
    mean to differ. Not where the hooks themselves differ (one rank's none, or another
    function, class or line): no value of theirs is to be kept out, each rank needs the same
    hook. Or the rate (``optimizer.lr``): ranks whose optimizers were made at different
    rates, or a rate set between fits on some ranks only (``optimizer.set_base_lr``), which
    the next fit's job check finds: both ways out
    (:data:`~distconv.sync.rate_agreement.SAME_RATE`), the second the one a shard's refusal
    of a hello names."""
    path = diff.split(": ", 1)[0]
    if path in DATA_KEYS:
        return diff + DATA_ADVICE
    if path == RATE_KEY:
        return f"{diff}: {SAME_RATE}"
    if not path.startswith(HOOK_KEY + ".") or path.rsplit(".", 1)[1] in HOOK_IDENTITY:
        return diff
    return diff + HOOK_ADVICE


def refusal_text(rank: int, other: int, ours: object, theirs: object, diff: str) -> str:
    """Why a job check refused the job, on ``rank``, the first rank unlike it being ``other``
    (``ours``, ``theirs``: the two descriptions; ``diff``: their first difference): that
    rank could not set up (:func:`setup_failure_in`), else the ranks' different jobs
    (:func:`~distconv.rank_endings.different_jobs_text`, which the launcher reads back): the
    words of MPI's job check and the parameter server workers' alike."""
    return setup_failure_in(theirs, ours) or different_jobs_text(rank, other, with_advice(diff))


def job_refusal(rank: int, other: int, ours: object, theirs: object, diff: str) -> JobRefused:
    """The :class:`JobRefused` of a parameter server worker's job check, in
    :func:`refusal_text`'s words (the arguments are its), marked
    :attr:`~JobRefused.told_of` the rank that could not set up where one did."""
    if (told := setup_failure_in(theirs, ours)) is None:  # refusal_text's first choice
        return JobRefused(different_jobs_text(rank, other, with_advice(diff)))
    failed = setup_failure_in_lines([told])  # the rank its own words name
    return JobRefused(told, told_of=None if failed is None else failed[0])
