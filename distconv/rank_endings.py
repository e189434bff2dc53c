"""The line by which a rank that ends an MPI job says why, in one place for both its sides;
the words by which every rank says that the ranks run different jobs (those by which a rank
says that its resume was refused for good are :mod:`distconv.refused_starts`'s); and the errors
of the job itself, its data, model or configuration, which a process's one-line ending names
(:func:`named_in_ending`) and the launcher reads back (:func:`job_error_in`). The words by
which a parameter server's shards and workers name the peer that kept them waiting are
:mod:`distconv.straggler_words`'s, read behind :data:`ERROR_CLASS` and :data:`PSERVER_ASKED`.

The sync writes it (:func:`distconv.sync.mpi.leaving.reason`, from ``abort_job`` before
``MPI_Abort`` and the watchdog's stop before the SIGKILL of its own rank)::

    rank 1: SyncError: stalled 30 s in allreduce; ending this rank
    rank 1: SyncError: step 3 differs; aborting the MPI job

and the launcher reads it back from mpiexec's output (:mod:`launcher.rank_reason`), so that the
failure report names it. Both take its form from here: a change of its wording on one side
only would silently drop every rank's reason from ``failure.json``'s cause. This module needs
neither numpy nor MPI (the launcher imports it, and must not need them).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

#: how the watchdog's stop ends the line: it then SIGKILLs its own rank
ENDING_THIS_RANK = "ending this rank"
#: how ``abort_job`` ends the line: it then calls ``MPI_Abort``
ABORTING_THE_JOB = "aborting the MPI job"
#: every ending the launcher reads
ENDINGS = (ENDING_THIS_RANK, ABORTING_THE_JOB)

#: the whole line's text: ``rank N: <Error>[: <message>]; <ending>``, the rank and the why
#: (an error's class name, an identifier; its message, if any, after ``: ``) its groups. A
#: message may span lines: a JSON line's object holds it whole (the text form's last line
#: has no ``rank N:``, and a line read from mpiexec's output holds no newline)
REASON = re.compile(
    rf"rank (\d+): ([^\W\d]\w*(?:: .*)?); (?:{'|'.join(re.escape(e) for e in ENDINGS)})",
    re.DOTALL,
)


def reason_text(rank: int, why: str, ending: str) -> str:
    """``rank 1: SyncError: stalled 30 s in allreduce; ending this rank``: the line's text,
    without its newline, for ``rank``, ``why`` (``SyncError: ...``, or a class name alone)
    and ``ending``.

    Raises:
        ValueError: ``ending`` is none of :data:`ENDINGS`: the launcher would not read it.
    """
    if ending not in ENDINGS:
        raise ValueError(f"a rank's reason ends with one of {ENDINGS}, not {ending!r}")
    return f"rank {rank}: {why}; {ending}"


#: how the ranks say that they run different jobs (:func:`different_jobs_text`), that a
#: parameter server shard that a rank started again runs another job than its first did
#: (:func:`another_job_text`), and that a rank names another job id than the shard's
#: (:func:`another_id_text`): :data:`DIFFERENT_JOBS` reads all three
_DIFFERENT = "run different jobs"
_ANOTHER = "runs another job than its first hello"
_OTHER_ID = "names another job id than the shard"

#: the errors the ranks raise the words under, by class name (as a traceback's last line has
#: it, behind its module's): the shards' refusals and MPI's check, and ``SyncError``, a shard's
#: refusal read from an older shard (no ``refused`` field)
_CLASSES = ("JobRefused", "JobMismatch", "SyncError")
#: a line (its text as the rank wrote it: MPI's tag and a JSON log's object taken off) that
#: says the ranks run different jobs (:func:`different_jobs_text`, :func:`another_job_text`,
#: :func:`another_id_text`), the group those words on.
#: Only behind what a rank's own line puts before them: ``NAME: error: `` (run_main's, ``distconv
#: train``'s), a parameter server reply's ``rank N, REQUEST: pserver HOST:PORT: `` (REQUEST as
#: the worker names it: ``hello``, a gather's tag, ``step 3``, ``checkpoint 3``), a rank's
#: reason's ``rank N: `` (the launcher's ``rank N ended the job: ``) and the error's class
#: (``JobMismatch: ``, a traceback's ``distconv.sync.errors.JobRefused: ``); the reason's ending
#: is left out. Not a quote of them inside another failure (a bye's error, a user's message),
#: nor behind another class (``ValueError: retry: ``, a ``PeerFailed``: another rank failed).
#: Public, with :data:`PSERVER_ASKED`: :mod:`distconv.straggler_words` reads its words behind them
ERROR_CLASS = rf"(?:(?:distconv(?:\.\w+)*\.)?(?:{'|'.join(_CLASSES)}): )?"
PSERVER_ASKED = r", \S+(?: \d+)?: pserver(?: \S+)?"  # a worker's request and the shard it asked
DIFFERENT_JOBS = re.compile(
    rf"(?:[^:]+: error: )?{ERROR_CLASS}(?:rank \d+(?:{PSERVER_ASKED}| ended the job)?: )?"
    rf"{ERROR_CLASS}((?:rank \d+ and rank \d+ {_DIFFERENT}"
    rf"|rank \d+ (?:{_ANOTHER}|{_OTHER_ID})): .*?)"
    rf"(?:; (?:{'|'.join(re.escape(e) for e in ENDINGS)}))?",
    re.DOTALL,
)


def different_jobs_text(rank: int, other: int, diff: str) -> str:
    """``rank 1 and rank 0 run different jobs: config.batch_size: 16 here, 8 there``: how
    every rank says it (a shard's refused hello and what it tells the ranks left waiting, the
    workers' start-up check, MPI's ``JobMismatch``). Every rank stops on it, none is at fault,
    and the launcher reads it back from a worker's last lines (:func:`different_jobs_in`), so
    that the failure report names it rather than blame the rank that happened to exit first."""
    return f"rank {rank} and rank {other} {_DIFFERENT}: {diff}"


def another_job_text(rank: int, diff: str) -> str:
    """``rank 0 runs another job than its first hello: config.batch_size: 16 here, 8 there``:
    how a parameter server shard refuses a restart of the rank whose hello set the job, with
    another description (``diff``; the others' job is its first's). Every rank stops on it as
    on :func:`different_jobs_text`, and the launcher reads it back alike."""
    return f"rank {rank} {_ANOTHER}: {diff}"


def another_id_text(rank: int, job: str, served: str) -> str:
    """``rank 1 names another job id than the shard: 'job8' here, 'job7' there; give
    --job-id 'job7', or restart the shards with --job-id 'job8'``: how a parameter server
    shard refuses a request naming another ``--job-id`` (``job``, quoted as the shard quotes
    it) than the one it serves (``served``), with both ways out, and what it tells the ranks
    of its job left waiting for that rank. The worker stops on it (a JobRefused), and so may
    the others: the launcher reads it back as :func:`different_jobs_text`, so that the report
    blames no rank that merely exited first."""
    return (
        f"rank {rank} {_OTHER_ID}: {job} here, {served} there; give --job-id {served}, or "
        f"restart the shards with --job-id {job}"
    )


def different_jobs_in(lines: Sequence[str]) -> str | None:
    """The last of ``lines`` (each a rank's text, as :data:`DIFFERENT_JOBS` reads it) that says
    the ranks run different jobs, from those words on; None where none does."""
    for line in reversed(lines):
        if found := DIFFERENT_JOBS.fullmatch(line):
            return found.group(1)
    return None


#: how a rank that cannot set up names its error in the job check's description (its
#: ``name``: :func:`setup_failure_name`), and how the others say it (:func:`setup_failure_text`)
_SETUP_FAILED = "before its job check"
_COULD_NOT = "could not set up"
#: a :func:`setup_failure_name`, the rank and its error (``Type: message``) its groups
SETUP_FAILURE_NAME = re.compile(rf"setup failed on rank (\d+) {_SETUP_FAILED}: (.*)", re.DOTALL)
#: how a rank whose description at an ``all_equal`` meeting between steps cannot be written
#: names its error in the meeting's description (:func:`meeting_failure_name`), and how the
#: others say it: that rank's failure as a setup's is, not the ranks' different jobs
_MEETING_FAILED = "before its exchange"
_COULD_NOT_MEET = "could not make its all_equal description"
#: a :func:`meeting_failure_name`, the rank and its error its groups
MEETING_FAILURE_NAME = re.compile(
    rf"all_equal failed on rank (\d+) {_MEETING_FAILED}: (.*)", re.DOTALL
)
#: a name as repr() quotes it, or its start cut off with ``...`` (a shard's refusal quotes 400
#: characters of each value at most: ``distconv.sync.ps.job_hello.VALUE_CHARS``)
_QUOTED = r"'(?:[^'\\]|\\.)*(?:'|\.\.\.)|\"(?:[^\"\\]|\\.)*(?:\"|\.\.\.)"
#: a rank's line (as :data:`DIFFERENT_JOBS` reads it, behind the same words) that says another
#: rank could not set up (:func:`setup_failure_text`: MPI's job check, the parameter server
#: workers'), its rank and error the groups; or that the ranks run different jobs where one
#: side's ``name`` is a :func:`setup_failure_name` (a shard's refusal of a hello, which
#: compares the descriptions itself), the two quoted names the groups (4 and 5; the first
#: form's words ``could not ...`` group 2)
_SETUP_FAILURE = re.compile(
    rf"(?:[^:]+: error: )?{ERROR_CLASS}(?:rank \d+(?:{PSERVER_ASKED}| ended the job)?: )?"
    rf"{ERROR_CLASS}(?:rank (\d+) ({_COULD_NOT}|{_COULD_NOT_MEET}): (.*?)"
    rf"|(?:rank \d+ and rank \d+ {_DIFFERENT}|rank \d+ {_ANOTHER}): "
    rf"name: ({_QUOTED}) here, ({_QUOTED}) there(?:[ ;].*)?)"
    rf"(?:; (?:{'|'.join(re.escape(e) for e in ENDINGS)}))?",
    re.DOTALL,
)


#: the errors of the job itself, by the name of their class (``distconv.data.DataError``,
#: ``distconv.network.NetworkError``, ``distconv.layers.errors.LayerError``,
#: ``distconv.placement.RuntimeConfigError``): its data, its model, its configuration. The same
#: command on the same files meets them again, at the same step: the launcher restarts none
#: (:func:`job_error_in`). Not a ``CheckpointError`` (the resume sets a damaged newest
#: checkpoint aside, and one refused for good is
#: :func:`distconv.refused_starts.refused_for_good_in`'s), an ``OSError`` (a disk, a network file
#: system), a ``SyncError`` (a peer, a port, a stall), a ``TrainingError`` (a divergence that an
#: asynchronous job's other order of updates may not meet again), a ``BackendError`` (a GPU that
#: may work again)
JOB_ERRORS = ("DataError", "NetworkError", "LayerError", "RuntimeConfigError")
#: their subclasses, by name (a ``LayerError[LinAlgError]`` is read by its brackets);
#: ``tests/launcher/test_launch_job_errors.py`` ties the two lists to the classes
JOB_ERROR_SUBCLASSES = ("LayerTypeError", "LayerResultError")
_JOB_CLASS = (
    rf"(?:distconv(?:\.\w+)*\.)?((?:{'|'.join(JOB_ERRORS + JOB_ERROR_SUBCLASSES)})(?:\[\w+\])?)"
)
#: a rank's line that says it stops on an error of the job itself (:data:`JOB_ERRORS`), the
#: class and its message the groups: the one-line ending (``NAME: error: DataError: ...``,
#: :func:`named_in_ending`), MPI's reason (``rank 0: LayerError: ...; aborting the MPI job``,
#: the launcher's ``rank 0 ended the job: ``), another rank's word of it (``rank 0 could not set
#: up: DataError: ...``, behind what :data:`DIFFERENT_JOBS` reads before it) or a traceback's
#: last line, its class named with its module (``distconv.data.DataError: ...``)
JOB_ERROR = re.compile(
    rf"(?:[^:]+: error: (?:{ERROR_CLASS}(?:rank \d+(?:{PSERVER_ASKED})?: )?"
    rf"{ERROR_CLASS}rank \d+ {_COULD_NOT}: )?"
    rf"|rank \d+(?: ended the job| {_COULD_NOT})?: |(?=distconv\.))"
    rf"{_JOB_CLASS}: (.*?)(?:; (?:{'|'.join(re.escape(e) for e in ENDINGS)}))?",
    re.DOTALL,
)


def named_in_ending(error: BaseException) -> bool:
    """Whether the one-line ending of a process names ``error``'s class before its message
    (``distconv train: error: DataError: ...``): one of :data:`JOB_ERRORS` (or of their
    subclasses) of distconv's own, which :func:`job_error_in` reads back. Not one raised as a
    file could not be read (``DataError: f.idx: cannot read: [Errno 5] ...``, its context an
    ``OSError``): the file, not the job, may be fine on the next attempt."""
    return ending_name(error) is not None


def ending_name(error: BaseException) -> str | None:
    """The class name that the one-line ending puts before ``error``'s message, where
    :func:`named_in_ending`: its own where distconv defines it (``LayerTypeError``,
    ``LayerError[LinAlgError]``), else that of the nearest class of distconv's it derives from,
    a name :func:`job_error_in` reads (a script's ``class BadRows(DataError)`` is said
    ``DataError: ...``: by its own name, the launcher would restart it); None elsewhere."""
    if isinstance(error.__context__, OSError):
        return None
    for cls in type(error).__mro__:
        base = cls.__name__.partition("[")[0]
        if cls.__module__.startswith("distconv.") and base in JOB_ERRORS + JOB_ERROR_SUBCLASSES:
            return cls.__name__
    return None


def begins_as_job_error(message: str) -> bool:
    """Whether ``message`` begins with a job error's class (``DataError: ...``, a traceback's
    ``distconv.data.DataError: ...``): the ending of another error with that message, its own
    class left out, would read as the job's own (:func:`job_error_in`); it names its class."""
    return _BEGINS_AS_JOB_ERROR.match(message) is not None


_BEGINS_AS_JOB_ERROR = re.compile(rf"{_JOB_CLASS}: ")


def job_error_in(lines: Sequence[str]) -> tuple[str, str] | None:
    """The class and message of the last of ``lines`` (each a rank's text, as
    :data:`DIFFERENT_JOBS` reads it) that says a rank stops on an error of the job itself
    (:data:`JOB_ERROR`); None where none does."""
    for line in reversed(lines):
        if (found := JOB_ERROR.fullmatch(line)) is None:
            continue
        if found[1] != "DataError" or not _CANNOT_READ.match(found[2]):
            return found[1], found[2]
    return None


#: a data set's file that could not be read (``distconv.idx.read_idx``: ``PATH: cannot read:
#: [Errno 5] ...``, raised from the OSError): the one-line ending leaves its class out
#: (:func:`named_in_ending`), and so read, in a traceback's last line, MPI's abort line or what
#: another rank was told, none of which can leave it out, it is no job error either: the file
#: may read on the next attempt
_CANNOT_READ = re.compile(r".*?: cannot read: ", re.DOTALL)


#: what a rank's line puts before the words of the error it stopped on, as :data:`DIFFERENT_JOBS`
#: reads it, where it names them (its class, a shard's reply, MPI's reason, another rank told
#: of them: ``rank 0 could not set up: ``): :mod:`distconv.refused_starts` reads its refusals
#: behind it
BEFORE_WORDS = (
    rf"{ERROR_CLASS}(?:rank \d+(?:{PSERVER_ASKED}| ended the job)?: )?"
    rf"{ERROR_CLASS}(?:rank \d+ {_COULD_NOT}: )?"
)


def setup_failure_name(rank: int, text: str) -> str:
    """``setup failed on rank 0 before its job check: CheckpointError: ...``: the ``name`` of
    the job description by which rank ``rank``, which cannot set up (``text``: its error,
    ``Type: message``), makes the job check all the same
    (:func:`distconv.sync.errors.setup_failure_description`)."""
    return f"setup failed on rank {rank} {_SETUP_FAILED}: {text}"


def setup_failure_text(rank: int, text: str) -> str:
    """``rank 0 could not set up: RunDirError: runs/x already holds a run``: how the other
    ranks' job check says that rank ``rank`` could not set up (``text``: its error). The
    launcher reads it back (:func:`setup_failure_in_lines`) as that rank's failure: the
    report names it, and blames no rank that was only told."""
    return f"rank {rank} {_COULD_NOT}: {text}"


def meeting_failure_name(rank: int, text: str) -> str:
    """``all_equal failed on rank 1 before its exchange: ValueError: ...``: the ``name`` of
    the description by which rank ``rank``, whose own description at an ``all_equal`` meeting
    between steps cannot be written (``text``: its error), makes the meeting all the same."""
    return f"all_equal failed on rank {rank} {_MEETING_FAILED}: {text}"


def told_failure_text(name: object) -> str | None:
    """What the other ranks say where a description's ``name`` is a
    :func:`setup_failure_name` (:func:`setup_failure_text`) or a
    :func:`meeting_failure_name` (``rank 1 could not make its all_equal description: ...``):
    that rank's own failure, which the launcher reads back as such
    (:func:`setup_failure_in_lines`); None for any other name."""
    if not isinstance(name, str):
        return None
    if found := SETUP_FAILURE_NAME.fullmatch(name):
        return setup_failure_text(int(found[1]), found[2])
    if found := MEETING_FAILURE_NAME.fullmatch(name):
        return f"rank {found[1]} {_COULD_NOT_MEET}: {found[2]}"
    return None


def setup_failure_in_lines(lines: Sequence[str]) -> tuple[int, str] | None:
    """The rank that could not set up and its error (``CheckpointError: ...``), from the last of
    ``lines`` (each a rank's text, as :data:`DIFFERENT_JOBS` reads it) that says so: in
    :func:`setup_failure_text`'s words (or :func:`told_failure_text`'s for a meeting), or as
    the ranks' different jobs, one side's ``name`` a :func:`setup_failure_name` (a parameter
    server shard's refusal of a hello); None where none does. A rank's line that says it was
    only told of that failure: no mismatch of jobs."""
    found = _setup_failure_found(lines)
    return None if found is None else found[:2]


def setup_failure_said_in_lines(lines: Sequence[str]) -> str | None:
    """What :func:`setup_failure_in_lines` reads, in the words the ranks said it: ``rank 0
    could not set up: ...``, or a meeting's ``rank 1 could not make its all_equal description:
    ...`` (:func:`told_failure_text`), not rebuilt as a setup's; a shard's refusal naming a
    :func:`setup_failure_name` in :func:`setup_failure_text`'s. None where none says it."""
    found = _setup_failure_found(lines)
    return None if found is None else found[2]


def _setup_failure_found(lines: Sequence[str]) -> tuple[int, str, str] | None:
    """The rank, its error and the words said (:func:`setup_failure_said_in_lines`)."""
    for line in reversed(lines):
        if (found := _SETUP_FAILURE.fullmatch(line)) is None:
            continue
        if found[1] is not None:
            return int(found[1]), found[3], f"rank {found[1]} {found[2]}: {found[3]}"
        for quoted in found.group(4, 5):
            if (failed := SETUP_FAILURE_NAME.fullmatch(_unquoted(quoted))) is not None:
                rank, error = int(failed[1]), failed[2]
                return rank, error, setup_failure_text(rank, error)
    return None


def _unquoted(quoted: str) -> str:
    """The name a :data:`_QUOTED` stands for; one cut short keeps its ``...``, as written."""
    if len(quoted) > 1 and quoted[-1] == quoted[0]:
        try:
            name = ast.literal_eval(quoted)
        except (ValueError, SyntaxError):  # no literal after all (a stray backslash)
            return ""
        return name if isinstance(name, str) else ""
    return quoted[1:]
