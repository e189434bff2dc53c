"""The words by which distconv refuses, for good, to start a run: to resume a checkpoint of
another run, one that does not fit the model, one of another format version; to start in an
output directory that holds another run; to load weights (``--init-from``, ``load_weights``)
that do not fit or are not there; to train with an optimizer the parameter-server shards would
not rebuild. The same checkpoint, directory or script, so the same refusal, meets every attempt
of the job, and the launcher restarts none (:attr:`launcher.failure.Failure.every_attempt`): it
reads them back from a rank's last words (:func:`start_refused_in`). Written where distconv
refuses, read here: a change of those words on one side only drops the launcher's exemption of
them from ``--max-restarts`` (where a constant here can, the refusal takes its words from it).
This module needs neither numpy nor MPI (the launcher imports it, and must not need them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from distconv.rank_endings import BEFORE_WORDS
from distconv.source_words import SOURCES, SourceWords

#: the words by which distconv refuses to resume from a checkpoint of another run
#: (``distconv.resume_facts.check_same_run``: ``checkpoint P comes from a different run;
#: resuming would not reproduce it (...)``) or one that does not fit the model
#: (``distconv.checkpoint.check_fit``: ``checkpoint P does not fit the model: ...``): the same
#: checkpoint, so the same refusal, on every attempt. Written there, read here: a change of
#: those words drops the launcher's exemption of them from ``--max-restarts``
_OTHER_RUN = "comes from a different run"
_RESUME_REFUSALS = (f"{_OTHER_RUN}; resuming would not reproduce it", "does not fit the model: ")
#: and those by which ``distconv.checkpoint.load_checkpoint`` refuses a file of another format
#: version (``checkpoint P has format version '3'; this distconv reads version '2': ...``, a
#: ``CheckpointVersionError``), its version and this distconv's the groups: the resume sets no
#: such file aside (the distconv that wrote it reads it), so every attempt meets it again.
#: Written there, read here too: ``tests/launcher/test_launch_resume_refused_once.py`` reads
#: that function's own message back. Each group stops at a repeat of the words before it, so a
#: long line that repeats them is read in linear time (tests/launcher/test_refused_starts_cost.py)
_OTHER_VERSION = (
    r"has format version (?P<theirs>(?:(?!has format version )[^;])*?); this distconv reads "
    r"version (?P<ours>(?:(?!has format version )[^:])*?): "
)
#: and those by which ``distconv.legacy_run.legacy_refusal`` refuses a run directory whose one
#: checkpoint is a distconv's from before step checkpoints, format version 1 (``runs/x holds a
#: checkpoint of an older distconv (checkpoint.safetensors, format version 1, ...``, a
#: ``RunDirError``, with or without ``--resume``), that file's name the group; the directory
#: holds no ``: `` (a quote of the words behind another error's class would). Read back alike
_VERSION_1_RUN = (
    r"holds a checkpoint of an older distconv \((?P<legacy>[^()]*?), format "
    r"version 1, from before step checkpoints\), which this version cannot resume\. "
)
#: a directory as the refusals that begin with one name it (:data:`_VERSION_1_RUN`'s, and those
#: of :data:`_DIRECTORY_REFUSALS` whose words begin with it): no ``: ``, and a space after it;
#: the ``: `` excluded keeps a quote behind another error's class from reading as a refusal
_DIRECTORY = r"(?:(?!: ).)*? "
#: and those by which the chief refuses its output directory (or its lack), by the name of their
#: group (an identifier), with what the launcher says of each (:func:`refused_for_good_in`);
#: each directory holds no ``: ``, as above. Written there, read here:
#: ``tests/launcher/test_launch_resume_refused_once.py`` reads each refusal's own message back
_DIRECTORY_REFUSALS = {
    #: ``distconv.resume.StepCheckpoints.open``'s without ``--resume`` (``runs/x already holds a
    #: run; pass --resume to continue it, ...``, a ``RunDirError``): the refusal changes nothing
    #: there, and a restart continues only a run its own launch began
    #: (:meth:`~distconv.job_start.JobStart.restarts_run_in`), so every attempt is refused
    #: alike. Not ``runs/x is in use by pid N on HOST; ...``, of the same class: a process of
    #: the attempt before may still hold the lock, which a restart may find free (the launcher
    #: tells another job's holder apart: :data:`ANOTHER_JOBS_RUN`); nor
    #: ``runs/x/checkpoints links to /disk/c, which is not there (a disk not mounted yet?)``, a
    #: fresh start's next check (``RunDirectory.check_checkpoints_there``), restarted: the run
    #: here is told by the directory's own files, its checkpoints link by the disk's mount
    "held": (
        _DIRECTORY + "already holds a run; pass --resume to continue it",
        "the output directory already holds another run",
    ),
    #: ``StepCheckpoints.open``'s with ``--resume`` where the directory holds no complete
    #: checkpoint, or is not there (``--resume: no complete checkpoint in runs/x/checkpoints
    #: ...``), and ``distconv.default_out``'s where the default ``--out`` is not there
    #: (``--resume: no run in runs/x, the default --out for ...``): the refusal writes nothing,
    #: so no attempt finds one
    "none": (
        r"--resume: no (?:complete checkpoint|run) in ",
        "the output directory holds no checkpoint to resume",
    ),
    #: ``distconv.run_dir.RunDirectory.clear_unfinished``'s, ``--resume auto`` finding no
    #: checkpoint beside files that no run without one leaves (``runs/x has no checkpoint to
    #: resume, and holds files that no distconv run without one leaves (...), which starting
    #: afresh would delete: ...``, a ``RunDirError``): it deletes nothing, so every attempt
    #: finds them. Not its ``..., and its metrics.jsonl cannot be read (...)``: an OSError; nor
    #: ``runs/x/checkpoints links to /disk/c, which is not there (a disk not mounted yet?)``
    #: (``RunDirectory.check_checkpoints_there``, met before this or ``"none"``), which a
    #: restart may find mounted, as it may an ``--out`` linked so (``cannot be made``)
    "foreign": (
        _DIRECTORY + "has no checkpoint to resume, and holds files that no distconv run without "
        "one leaves ",
        "the output directory holds files that starting afresh would delete",
    ),
    #: ``StepCheckpoints.open``'s where no checkpoint is complete and some manifest is not
    #: usable (``no usable checkpoint in runs/x: runs/x/checkpoints/step-00000006.json is
    #: damaged (...)``, a ``RunDirError``): the scan only reads, and sets none aside, so every
    #: attempt scans the same files. An OS's error reading one is a ``CheckpointReadError``
    "unusable": (
        r"no usable checkpoint in ",
        "the output directory holds no usable checkpoint",
    ),
    #: ``distconv.run_dir.RunDirectory.acquire``'s where ``--out`` is a file (``output directory
    #: runs/x exists and is not a directory``, a ``RunDirError``): no attempt makes it one. Not
    #: its ``... cannot be made: ...`` (a link to a disk not mounted yet, a full disk)
    "file": (
        r"output directory (?:(?!: ).)*? exists and is not a directory",
        "the output directory exists and is not a directory",
    ),
    #: ``distconv.run_dir.RunDirectory.clear``'s, ``--overwrite`` where ``checkpoints`` links to
    #: a folder holding files no run writes (``cannot clear the run in runs/x: runs/x/checkpoints
    #: links to /disk/c, which holds files no distconv run writes (...); move them away``, a
    #: ``RunDirError``): refused before anything is deleted, so every attempt finds them. Not
    #: its ``cannot clear the run in runs/x: PATH: <OS error>``
    "linked": (
        r"cannot clear the run in (?:(?!: ).)*?: (?:(?!: ).)*? links to "
        r"(?:(?!: | links to ).)*?, which holds files no distconv run writes ",
        "the checkpoints folder the output directory links to holds files no distconv run writes",
    ),
    #: ``StepCheckpoints.open``'s where a script's ``--resume`` (``resume=True``) comes without
    #: an output directory (``resume=True (--resume) needs an output directory (out_dir, --out)
    #: to find the checkpoint in; none was given``, a ``CheckpointError``): the restart's flags
    #: are the same
    "no_out": (
        r"resume=True \(--resume\) needs an output directory ",
        "--resume was given no output directory to find the checkpoint in",
    ),
}
_CHECKPOINT_ERROR = r"(?:distconv(?:\.\w+)*\.)?(?:Checkpoint(?:Version)?|RunDir)Error: "


def _directory_words() -> str:
    """The words of :data:`_VERSION_1_RUN` and :data:`_DIRECTORY_REFUSALS` as alternatives, each
    refusal's its group; those behind a :data:`_DIRECTORY` read after one scan of it: each on
    its own scanned the line again (some 60 ms in all for a line of 64 KiB, the launcher's
    longest: :data:`launcher.kept_line.KEPT_LINE_BYTES`; 20 ms so)."""
    behind, alone = [_VERSION_1_RUN], []
    for name, (words, _) in _DIRECTORY_REFUSALS.items():
        if words.startswith(_DIRECTORY):
            behind.append(f"(?P<{name}>{words.removeprefix(_DIRECTORY)})")
        else:
            alone.append(f"(?P<{name}>{words})")
    return "|".join([f"{_DIRECTORY}(?:{'|'.join(behind)})", *alone])


#: what a rank (or another, told of it: :func:`~distconv.rank_endings.setup_failure_text`) says
#: where its start was refused for good (:data:`_RESUME_REFUSALS`, :data:`_OTHER_VERSION`,
#: :data:`_VERSION_1_RUN`, :data:`_DIRECTORY_REFUSALS`), as
#: :data:`~distconv.rank_endings.DIFFERENT_JOBS` reads a line: behind ``NAME: error: `` or the
#: error's class (``CheckpointError: ``, a traceback's
#: ``distconv.checkpoint.CheckpointVersionError: ``; :data:`~distconv.rank_endings.BEFORE_WORDS`
#: before either), at least one of them; the refusal's kind its group ``kind``, or the two
#: versions, or the file, or a directory refusal's name
REFUSED_FOR_GOOD = re.compile(
    rf"(?:[^:]+: error: {BEFORE_WORDS}(?:{_CHECKPOINT_ERROR})?|{BEFORE_WORDS}{_CHECKPOINT_ERROR})"
    rf"(?:checkpoint .*? (?:(?P<kind>{'|'.join(map(re.escape, _RESUME_REFUSALS))})"
    rf"|{_OTHER_VERSION})|{_directory_words()}).*",
    re.DOTALL,
)


def refused_for_good_in(lines: Sequence[str]) -> str | None:
    """What the last of ``lines`` (each a rank's text, as
    :data:`~distconv.rank_endings.DIFFERENT_JOBS` reads it) that says a start was refused for
    good refused, and why, as the launcher says it: ``the checkpoint to resume comes from a
    different run``, ``... does not fit the model``, ``... has format version '3' where this
    distconv reads version '2'`` or, for a run of distconv 0.1's one checkpoint, ``... has
    format version 1 (checkpoint.safetensors, from before step checkpoints)``; ``the output
    directory already holds another run`` and the others of :data:`_DIRECTORY_REFUSALS`: words
    that every attempt of the job would meet again. None where none says so."""
    for line in reversed(lines):
        if (found := REFUSED_FOR_GOOD.fullmatch(line)) is None:
            continue
        for name, (_, said) in _DIRECTORY_REFUSALS.items():
            if found[name] is not None:
                return said
        return f"the checkpoint to resume {_resume_refusal(found)}"
    return None


def _resume_refusal(found: re.Match[str]) -> str:
    """Why :data:`REFUSED_FOR_GOOD`'s ``found`` refused the checkpoint to resume."""
    if (kind := found["kind"]) is not None:
        return _OTHER_RUN if kind.startswith(_OTHER_RUN) else kind.removesuffix(": ")
    if found["legacy"] is not None:
        return f"has format version 1 ({found['legacy']}, from before step checkpoints)"
    return f"has format version {found['theirs']} where this distconv reads version {found['ours']}"


#: the weights loaders' refusals to start (:mod:`distconv.init_from`: ``distconv train
#: --init-from PATH``'s, and a script's ``load_weights(PATH, params)``'s), by the words that tell
#: each, with what the launcher says of it: the same source on every attempt, so the same refusal
#: (read back by tests/launcher/test_init_from_restarts.py and test_load_weights_restarts.py).
#: Each is filled from the loader's :class:`~distconv.source_words.SourceWords` its message
#: begins with: ``{source}`` its :attr:`~distconv.source_words.SourceWords.name`, ``{ours}`` whose
#: dtype the weights are cast to
_INIT_FROM = {
    ": its weights do not fit this model ": "the {source} checkpoint does not fit the model",
    ", which --overwrite deletes: ": "--overwrite would delete the {source} checkpoint",
    ": no such file or folder": "the {source} path holds no checkpoint",
    ": no complete checkpoint there ": "the {source} path holds no checkpoint",
    "'s range, which the cast to {ours} dtype makes infinite": (
        "the {source} checkpoint holds values past {ours} dtype"
    ),
    "'s range, which the cast to this model's dtype wraps": (
        "the {source} checkpoint holds values past {ours} dtype"
    ),
    " ranks from it with frozen parameters ": (
        "the {source} checkpoint cannot start several ranks with frozen parameters"
    ),
    ": its checkpoint is damaged (": "the {source} checkpoint is damaged",
    ": its checkpoint has another format version (": (
        "the {source} checkpoint has another format version"
    ),
    ": no checkpoint's manifest, or a damaged one (": (
        "the {source} file is no checkpoint's manifest"
    ),
    ": a parameter-server shard's checkpoint part, ": (
        "the {source} path is a parameter-server shard's part"
    ),
}


def _filled(words: SourceWords) -> dict[str, str]:
    """:data:`_INIT_FROM` in the words of one loader (``words``)."""
    said = {"source": words.name, "ours": words.ours}
    return {tell.format(**said): told.format(**said) for tell, told in _INIT_FROM.items()}


#: :data:`_INIT_FROM` filled for each loader (:data:`~distconv.source_words.SOURCES`), by the
#: flag or call its refusals begin with
_LOADERS = {words.flag: _filled(words) for words in SOURCES}
#: a loader's refusal as a rank says it: behind ``NAME: error: `` or the error's class, its
#: loader's flag or call, the group ``flag``
_INIT_FROM_START = re.compile(rf"[eE]rror: (?P<flag>{'|'.join(map(re.escape, _LOADERS))})")


def init_from_refused_in(lines: Sequence[str]) -> str | None:
    """What the last of ``lines`` that says a weights loader refused to start says, as the
    launcher says it (``the --init-from checkpoint does not fit the model``, ``the load_weights
    path holds no checkpoint``); None where none does."""
    found = [said for line in lines if (said := _init_from_refusal(line)) is not None]
    return found[-1] if found else None


def _init_from_refusal(line: str) -> str | None:
    """The refusal whose words come first after ``line``'s first ``error: --init-from `` (or
    ``Error: load_weights ``), or None. Found with one scan per refusal: a regular expression's
    lazy scan to the line's end from each repeat of those words took 3.5 s on a line of 64 KiB
    that repeats them."""
    start = _INIT_FROM_START.search(line)
    if start is None:
        return None
    refusals = _LOADERS[start["flag"]]
    at = {line.find(words, start.end()): said for words, said in reversed(refusals.items())}
    first = min((i for i in at if i >= 0), default=None)
    return None if first is None else at[first]


#: the words by which rank 0 refuses an optimizer the parameter-server shards would not rebuild
#: (:func:`distconv.sync.ps.shard_optimizer.refuse_unservable`, which raises them from here, a
#: ``JobRefused``: ``optimizer __main__.SignAdam cannot run on the parameter server: ...``), the
#: optimizer's class ``{optimizer}``: the script's own class, so the same refusal, on every attempt
UNSERVABLE_OPTIMIZER = "optimizer {optimizer} cannot run on the parameter server: "
_BEFORE_CLASS, _AFTER_CLASS = UNSERVABLE_OPTIMIZER.split("{optimizer}")
#: that refusal as a rank says it (``NAME: error: ``), as a traceback's last line or a peer told
#: of it quotes it (``JobRefused: ``); the class (no space in it) the group ``optimizer``
_UNSERVABLE = re.compile(
    rf"(?:[eE]rror|JobRefused): {re.escape(_BEFORE_CLASS)}(?P<optimizer>\S+?)"
    rf"{re.escape(_AFTER_CLASS)}"
)


def unservable_optimizer_in(lines: Sequence[str]) -> str | None:
    """What the last of ``lines`` that says the shards would not rebuild the job's optimizer
    says, as the launcher says it (``optimizer __main__.SignAdam cannot run on the parameter
    server``); None where none does."""
    for line in reversed(lines):
        if (found := _UNSERVABLE.search(line)) is not None:
            return UNSERVABLE_OPTIMIZER.format(optimizer=found["optimizer"]).removesuffix(": ")
    return None


#: the words by which the launcher says that a rank's ``--out`` is in use by a process of
#: another job (:func:`launcher.out_holder.held_by_another_job`, in the failure's cause): that
#: job's run goes on as long as it goes, and a restart taking the directory once it ended would
#: start over its run (``--overwrite`` deleting it), so no attempt of this launch is restarted.
#: An in-use refusal whose holder is this launch's own is restarted: a process of the attempt
#: before may still hold the lock for a moment
ANOTHER_JOBS_RUN = "no process of this launch: another job's run is going there"


def held_elsewhere_in(lines: Sequence[str]) -> str | None:
    """``the output directory is in use by another job's run`` where one of ``lines`` holds
    the launcher's :data:`ANOTHER_JOBS_RUN`; None otherwise."""
    if any(ANOTHER_JOBS_RUN in line for line in lines):
        return "the output directory is in use by another job's run"
    return None


def start_refused_in(lines: Sequence[str]) -> str | None:
    """What ``lines`` (a failed rank's last line and its cause) say refused the job's start
    for good, as the launcher says it: a resume's or an output directory's refusal
    (:func:`refused_for_good_in`), a weights loader's (:func:`init_from_refused_in`), an
    optimizer the shards would not rebuild (:func:`unservable_optimizer_in`), an output
    directory another job's run holds (:func:`held_elsewhere_in`); None where none does, and a
    restart may get past it."""
    return (
        refused_for_good_in(lines)
        or init_from_refused_in(lines)
        or unservable_optimizer_in(lines)
        or held_elsewhere_in(lines)
    )
