"""The words by which distconv refuses, for good, to resume a run: a checkpoint of another run,
one that does not fit the model, one of another format version. The same checkpoint, so the
same refusal, meets every attempt of the job, and the launcher restarts none
(:attr:`launcher.failure.Failure.every_attempt`): it reads them back from a rank's last words
(:func:`resume_refused_in`). Written where distconv refuses, read here: a change of those words
on one side only drops the launcher's exemption of them from ``--max-restarts``. This module
needs neither numpy nor MPI (the launcher imports it, and must not need them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from distconv.rank_endings import BEFORE_WORDS

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
#: that function's own message back
_OTHER_VERSION = r"has format version (?P<theirs>.*?); this distconv reads version (?P<ours>.*?): "
#: and those by which ``distconv.run_dir.legacy_refusal`` refuses a run directory whose one
#: checkpoint is a distconv's from before step checkpoints, format version 1 (``runs/x holds a
#: checkpoint of an older distconv (checkpoint.safetensors, format version 1, ...``, a
#: ``RunDirError``, with or without ``--resume``), that file's name the group; the directory
#: holds no ``: `` (a quote of the words behind another error's class would). Read back alike
_VERSION_1_RUN = (
    r"(?:(?!: ).)*? holds a checkpoint of an older distconv \((?P<legacy>[^()]*?), format "
    r"version 1, from before step checkpoints\), which this version cannot resume\. "
)
_CHECKPOINT_ERROR = r"(?:distconv(?:\.\w+)*\.)?(?:Checkpoint(?:Version)?|RunDir)Error: "


#: what a rank (or another, told of it: :func:`~distconv.rank_endings.setup_failure_text`) says
#: where its resume was refused (:data:`_RESUME_REFUSALS`, :data:`_OTHER_VERSION`,
#: :data:`_VERSION_1_RUN`), as :data:`~distconv.rank_endings.DIFFERENT_JOBS` reads a line: behind
#: ``NAME: error: `` or the error's class (``CheckpointError: ``, a traceback's
#: ``distconv.checkpoint.CheckpointVersionError: ``; :data:`~distconv.rank_endings.BEFORE_WORDS`
#: before either), at least one of them; the refusal's kind its group ``kind``, or the two
#: versions, or the file
RESUME_REFUSED = re.compile(
    rf"(?:[^:]+: error: {BEFORE_WORDS}(?:{_CHECKPOINT_ERROR})?|{BEFORE_WORDS}{_CHECKPOINT_ERROR})"
    rf"(?:checkpoint .*? (?:(?P<kind>{'|'.join(map(re.escape, _RESUME_REFUSALS))})"
    rf"|{_OTHER_VERSION})|{_VERSION_1_RUN}).*",
    re.DOTALL,
)


def resume_refused_in(lines: Sequence[str]) -> str | None:
    """Why the last of ``lines`` (each a rank's text, as
    :data:`~distconv.rank_endings.DIFFERENT_JOBS` reads it) that says a resume was refused
    refused it: ``comes from a different run``, ``does not fit the
    model``, ``has format version '3' where this distconv reads version '2'`` or, for a run of
    distconv 0.1's one checkpoint, ``has format version 1 (checkpoint.safetensors, from before
    step checkpoints)``, words that every attempt of the job would meet again; None where none
    says so."""
    for line in reversed(lines):
        if (found := RESUME_REFUSED.fullmatch(line)) is None:
            continue
        if (kind := found["kind"]) is not None:
            return _OTHER_RUN if kind.startswith(_OTHER_RUN) else kind.removesuffix(": ")
        if found["legacy"] is not None:
            return f"has format version 1 ({found['legacy']}, from before step checkpoints)"
        theirs, ours = found["theirs"], found["ours"]
        return f"has format version {theirs} where this distconv reads version {ours}"
    return None
