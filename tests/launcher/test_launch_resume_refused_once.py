"""A resume that distconv refuses because the checkpoint is of another run, does not fit the
model or is of another format version, fails the same way on every attempt, and so does a
launch without ``--resume`` into an output directory that holds another run: ``--max-restarts``
restarted them all the same (two restarts, the refusal three times over), where the ranks'
different jobs were already not retried. Real ``distconv train`` runs: one to checkpoint, then
real launches resuming it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.checkpoint import BUILD_KEY, VERSION, load_checkpoint
from distconv.checkpoint_errors import CheckpointError, CheckpointVersionError
from distconv.data import split, synthetic
from distconv.default_out import resume_into_default
from distconv.files import hold_lock
from distconv.legacy_run import legacy_refusal
from distconv.rank_endings import reason_text, setup_failure_text
from distconv.refused_starts import refused_for_good_in
from distconv.run_dir import RunDirectory, RunDirError
from distconv.run_files import LEGACY_CHECKPOINT, LOCK, METRICS, PLOT
from tests.launcher.launch_cli import ENV, REPO_ROOT, launch
from tests.launcher.real_children import mpiexec_or_skip
from tests.restart_job import small_trainer
from tests.test_checkpoint_build import OTHER, _rewrite_metadata
from tests.test_checkpoint_version_1 import FILE as VERSION_1_FILE
from tests.test_resume_checks import _rewrite_extra

#: a short run of distconv train's own: its checkpoint is the one each launch resumes
TRAIN = ("--data", "synthetic", "--epochs", "1", "--no-progress", "-q")
#: a launch of one worker and no shards, and how its worker's one-line ending begins
LOCAL_1 = ("local", "--workers", "1", "--servers", "0")
WORKER_0 = "[worker 0] distconv train: error: "
#: the launches a refusal is read from: the rank's own line (one worker), a rank told of it by
#: a shard (two workers), each rank's line under mpiexec
EVERY_TELLING = pytest.mark.parametrize(
    ("job", "said_by"),
    [
        (LOCAL_1, WORKER_0),
        (("local", "--workers", "2", "--servers", "1", "--insecure"), WORKER_0),
        (("mpi", "-np", "2"), "[0] distconv train: error: "),
    ],
    ids=["own line", "told by a shard", "mpi"],
)


def _trained(tmp_path_factory, *flags: str) -> str:
    """The ``--out`` of a first run of :data:`TRAIN` with ``flags``, one of its own."""
    out = tmp_path_factory.mktemp("first") / "out"
    command = [sys.executable, "-m", "distconv", "train", *TRAIN, "--batch-size", "64", *flags]
    done = subprocess.run(
        [*command, "--out", str(out)], env=ENV, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return str(out)


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory) -> str:
    return _trained(tmp_path_factory)


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory) -> str:
    """A run whose checkpoints are of steps 3 and 6 (6 steps an epoch: 384 examples, 64 a
    batch)."""
    return _trained(tmp_path_factory, "--checkpoint-every", "3")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("job", "change", "refusal"),
    [  # the rank's own line (one worker), and a rank told of it (a shard's job: two)
        (LOCAL_1, ("--batch-size", "64", "--seed", "1"),
         "the checkpoint to resume comes from a different run"),
        (("local", "--workers", "2", "--servers", "1", "--insecure"),
         ("--batch-size", "32", "--dtype", "float64"),  # named by its facts, not its fit
         "the checkpoint to resume comes from a different run"),
    ],
)  # fmt: skip
def test_a_refused_resume_is_not_restarted(tmp_path, checkpointed, job, change, refusal):
    out = tmp_path / "out"
    shutil.copytree(checkpointed, out)
    _refused_once(tmp_path, out, job, change, refusal)


@pytest.mark.timeout(120)
def test_a_resume_that_does_not_fit_the_model_is_not_restarted(tmp_path, checkpointed):
    """A checkpoint of an older distconv, which recorded neither the dtype nor the training
    set: nothing names the cause, so the parameters that differ are the refusal (another
    --dtype, now named by those facts where they are recorded, was this case's real launch)."""
    out = tmp_path / "out"
    shutil.copytree(checkpointed, out)
    _rewrite_extra(RunDirectory(out).latest(), dtype="None", train_data=None)
    change = ("--batch-size", "64", "--dtype", "float64")
    _refused_once(tmp_path, out, LOCAL_1, change, "the checkpoint to resume does not fit the model")


#: how the launcher names what it refused to restart, where the checkpoint was refused
RESUMED = "the checkpoint to resume"
#: what the launcher says of a run directory whose one checkpoint is distconv 0.1's
VERSION_1 = f"has format version 1 ({LEGACY_CHECKPOINT}, from before step checkpoints)"
#: what the launcher says of a checkpoint of format version '3', which this distconv cannot read
OTHER_VERSION = (
    f"the checkpoint to resume has format version '3' where this distconv reads version {VERSION!r}"
)


@pytest.mark.timeout(120)
@EVERY_TELLING
def test_a_resume_of_another_format_version_is_not_restarted(tmp_path, checkpointed, job, said_by):
    """The resume does not set such a file aside (the distconv that wrote it reads it): every
    attempt meets it again. The launcher's last message names the file and both versions."""
    if job[0] == "mpi":
        mpiexec_or_skip()
    out = tmp_path / "out"
    shutil.copytree(checkpointed, out)
    path = RunDirectory(out).latest().part("chief")
    _rewrite_metadata(path, version="3", **{BUILD_KEY: OTHER})
    said = _refused_once(tmp_path, out, job, ("--batch-size", "64"), OTHER_VERSION, said_by)
    final = said[said.index("(after 0 restart(s))") :]  # its headline and the rank's last lines
    assert f"{path} has format version '3'; this distconv reads version {VERSION!r}" in final


@pytest.mark.timeout(120)
@pytest.mark.parametrize("damaged", ["newest", "older"])
def test_a_damaged_checkpoint_beside_one_of_another_version(tmp_path, two_checkpoints, damaged):
    """Newest damaged, the one before of another version: the damaged one is set aside and the
    next tried, whose version is refused; the newest of another version, the one before
    damaged: refused at the newest, nothing set aside. Either way one attempt, not restarted."""
    out = tmp_path / "out"
    shutil.copytree(two_checkpoints, out)
    older, newest = (m.part("chief") for m in RunDirectory(out).manifests())
    refused, other = (older, newest) if damaged == "newest" else (newest, older)
    _rewrite_metadata(refused, version="3")
    raw = bytearray(other.read_bytes())
    raw[-1] ^= 1  # a bit of the last tensor's data: it fails its checksum
    other.write_bytes(bytes(raw))
    said = _refused_once(tmp_path, out, LOCAL_1, ("--batch-size", "64"), OTHER_VERSION)
    assert f"[worker 0] distconv train: error: checkpoint {refused} has format version '3'" in said
    aside = sorted(p.name for p in (out / "checkpoints").iterdir() if p.suffix == ".unusable")
    set_aside = damaged == "newest"
    assert aside == (["step-00000006.json.unusable", "step-00000006.unusable"] if set_aside else [])
    assert ("setting it aside, trying the checkpoint before it" in said) == set_aside, said[-3000:]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("resume", [("--resume",), ()], ids=["--resume", "no --resume"])
def test_a_run_of_a_version_1_checkpoint_is_not_restarted(tmp_path, resume):
    """A run directory whose one checkpoint is distconv 0.1's (format version 1, before step
    checkpoints) is refused, with or without ``--resume``, saying how to keep its weights: the
    same directory, so the same refusal, on every attempt."""
    out = tmp_path / "out"
    out.mkdir()
    shutil.copyfile(VERSION_1_FILE, out / LEGACY_CHECKPOINT)
    refusal = f"the checkpoint to resume {VERSION_1}"
    said = _refused_once(tmp_path, out, LOCAL_1, resume, refusal, resume_flag=())
    assert f"{WORKER_0}{legacy_refusal(out)}" in said, said[-3000:]
    assert (out / LEGACY_CHECKPOINT).read_bytes() == VERSION_1_FILE.read_bytes()


#: what the launcher says of an output directory that holds another run, launched into
#: without --resume
HELD = "the output directory already holds another run"


@pytest.mark.timeout(120)
@EVERY_TELLING
def test_a_launch_into_another_run_without_resume_is_not_restarted(
    tmp_path, checkpointed, job, said_by
):
    """No --resume into a directory that holds another launch's run: refused, and a restart,
    which continues only its own launch's run, is refused alike, the directory unchanged."""
    if job[0] == "mpi":
        mpiexec_or_skip()
    out = tmp_path / "out"
    shutil.copytree(checkpointed, out)
    before = RunDirectory(out).manifests()
    said = _refused_once(tmp_path, out, job, ("--batch-size", "64"), HELD, said_by, ())
    assert f"{said_by}{out} already holds a run; pass --resume" in said, said[-3000:]
    assert RunDirectory(out).manifests() == before


@pytest.mark.timeout(120)
def test_an_output_directory_in_use_is_refused_before_the_launch_starts(tmp_path, checkpointed):
    """``... is in use by pid N on HOST``, the same RunDirError's class, was restarted: each
    attempt started its children again for nothing, and one that found the lock free once the
    other process ended took its run. Before the launch starts, a holder is none of its own:
    refused then, in the run's words, nothing started and the directory unchanged."""
    out = tmp_path / "out"
    shutil.copytree(checkpointed, out)
    before = RunDirectory(out).manifests()
    held = hold_lock(out / LOCK)
    try:
        run = tmp_path / "run"
        done = launch(
            *LOCAL_1, "--max-restarts", "1", "--run-dir", str(run), "--", *TRAIN[:2],
            "--epochs", "2", "--out", str(out), "--resume", cwd=tmp_path,
        )  # fmt: skip
    finally:
        os.close(held)
    said = done.stderr + done.stdout
    assert done.returncode == 1, said[-3000:]
    assert f"error: --out after --: {out} is in use by pid {os.getpid()} on " in said, said
    assert WORKER_0 not in said and not run.exists(), said[-3000:]  # nothing started
    assert RunDirectory(out).manifests() == before


def _said_forms(error: Exception) -> list[str]:
    """``error`` (a RunDirError, a CheckpointError) in each form a rank says it: ``distconv
    train``'s line, a traceback's, MPI's reason, a rank told of it by a shard, a script's
    line."""
    name = type(error).__name__
    told = setup_failure_text(0, f"{name}: {error}")
    return [
        f"distconv train: error: {error}",
        f"{type(error).__module__}.{name}: {error}",
        reason_text(0, f"{name}: {error}", "aborting the MPI job"),
        f"distconv train: error: rank 1, all_equal:1: pserver 127.0.0.1:5: {told}",
        f"my_model.py: error: {name}: {error}",
    ]


def test_a_held_directory_is_read_in_the_words_the_resume_writes(tmp_path):
    """Written there (``StepCheckpoints.open``'s own RunDirError, raised by a real fit into a
    directory that holds a run), read here in each form: a change of those words fails this.
    The lock's refusal, raised by a real fit while another holder keeps it, is no refusal
    for good in any form."""
    out = tmp_path / "out"
    out.mkdir()
    (out / METRICS).write_text('{"epoch": 1}\n')  # what a run leaves
    train, test = split(synthetic(n=64, num_classes=4, seed=3), 0.25, seed=3)
    with pytest.raises(RunDirError) as refused:
        small_trainer(out).fit(train, test, epochs=1)
    assert str(refused.value).startswith(f"{out} already holds a run")
    for line in _said_forms(refused.value):
        assert refused_for_good_in(["before", line]) == HELD, line
    held = hold_lock(out / LOCK)
    try:
        with pytest.raises(RunDirError) as in_use:
            small_trainer(out).fit(train, test, epochs=1, resume=True)
    finally:
        os.close(held)
    assert f"{out} is in use by pid {os.getpid()}" in str(in_use.value)
    for line in _said_forms(in_use.value):
        assert refused_for_good_in([line]) is None, line


#: what the launcher says where --resume finds no checkpoint
NONE = "the output directory holds no checkpoint to resume"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("job", "there", "said_by"),
    [  # the rank's own line; a rank told of it by a shard; each rank's under mpiexec
        (LOCAL_1, "empty", WORKER_0),
        (LOCAL_1, "missing", WORKER_0),
        (("local", "--workers", "2", "--servers", "1", "--insecure"), "empty", WORKER_0),
        (("local", "--workers", "1", "--servers", "1", "--insecure"), "missing", WORKER_0),
        (("mpi", "-np", "2"), "missing", "[0] distconv train: error: "),
    ],
    ids=["empty", "missing", "told by a shard", "missing, with a shard", "mpi"],
)
def test_a_resume_of_no_checkpoint_is_not_restarted(tmp_path, job, there, said_by):
    """--resume into a directory without a checkpoint, empty or not there: the refusal writes
    nothing, so every attempt finds none. With shards, whose --checkpoint-dir the launcher
    points at --out, the shards made it at start: the chief found an empty folder, locked it,
    refused without saying it had not been there, and left it holding run.lock."""
    if job[0] == "mpi":
        mpiexec_or_skip()
    out = tmp_path / "out"
    if there == "empty":
        out.mkdir()
    said = _refused_once(tmp_path, out, job, ("--batch-size", "64"), NONE, said_by)
    refused = f"{said_by}--resume: no complete checkpoint in {out}/checkpoints"
    if there == "missing":
        refused += f": {out} does not exist"
    assert refused in said, said[-3000:]
    assert out.exists() == (there == "empty")  # made nothing, for the next attempt to find


def test_a_resume_of_no_checkpoint_is_read_in_the_words_the_resume_writes(tmp_path):
    """Written there (a real fit's refusals with --resume: a directory without a checkpoint,
    one not there, and the default --out of ``distconv train`` not there, as
    ``resume_into_default`` says it), read here in each form: a change of those words fails
    this."""
    train, test = split(synthetic(n=64, num_classes=4, seed=3), 0.25, seed=3)
    empty, missing = tmp_path / "empty", tmp_path / "missing"
    empty.mkdir()
    errors = []
    for out in (empty, missing):
        with pytest.raises(CheckpointError) as refused:
            small_trainer(out).fit(train, test, epochs=1, resume=True)
        errors.append(refused.value)
    with pytest.raises(CheckpointError) as refused:
        with resume_into_default(str(missing), True, "--data synthetic"):
            small_trainer(missing).fit(train, test, epochs=1, resume=True)
    errors.append(refused.value)
    assert str(errors[-1]).startswith(f"--resume: no run in {missing}, the default --out")
    for error in errors:
        for line in _said_forms(error):
            assert refused_for_good_in(["before", line]) == NONE, line


def _foreign_files(out: Path) -> None:
    """A directory without a checkpoint whose plot no run without one leaves."""
    out.mkdir()
    (out / PLOT).write_text("another tool's")


def _damaged_manifest(out: Path) -> None:
    """A directory whose one checkpoint's manifest is damaged."""
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "step-00000006.json").write_text("{damaged")


def _linked_foreign_files(out: Path) -> None:
    """A run whose ``checkpoints`` links to a folder beside it holding another tool's file."""
    elsewhere = out.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("not a run's")
    out.mkdir()
    (out / "checkpoints").symlink_to(elsewhere)


#: the output directory's refusals that a real fit raises and that every attempt meets again:
#: how the directory is made, the fit's resume, and what the launcher says
DIRECTORY_REFUSALS = {
    "foreign files": (
        _foreign_files,
        "auto",
        "the output directory holds files that starting afresh would delete",
    ),
    "damaged manifest": (
        _damaged_manifest,
        True,
        "the output directory holds no usable checkpoint",
    ),
    "a file": (
        lambda out: out.write_text("a file"),
        False,
        "the output directory exists and is not a directory",
    ),
    "a linked folder's files": (
        _linked_foreign_files,
        "overwrite",
        "the checkpoints folder the output directory links to holds files no distconv run writes",
    ),
}
#: the flags of each resume
RESUME_FLAGS = {
    False: (),
    True: ("--resume",),
    "auto": ("--resume", "auto"),
    "overwrite": ("--overwrite",),
}


@pytest.mark.parametrize("case", list(DIRECTORY_REFUSALS))
def test_a_directory_refusal_is_read_in_the_words_the_run_writes(tmp_path, case):
    """Written there (a real fit's refusal), read here in each form: a change of those words
    fails this."""
    make, resume, refusal = DIRECTORY_REFUSALS[case]
    make(out := tmp_path / "out")
    train, test = split(synthetic(n=64, num_classes=4, seed=3), 0.25, seed=3)
    with pytest.raises(CheckpointError) as refused:
        small_trainer(out).fit(train, test, epochs=1, resume=resume)
    for line in _said_forms(refused.value):
        assert refused_for_good_in(["before", line]) == refusal, line


#: the refusals a launch meets in an attempt: an --out that is a file the launcher refuses
#: before any attempt starts (test_launch_out_unmakeable.py)
IN_AN_ATTEMPT = [case for case in DIRECTORY_REFUSALS if case != "a file"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", IN_AN_ATTEMPT)
def test_a_directory_refusal_is_not_restarted(tmp_path, case):
    """The refusal leaves the directory as it was: every attempt meets it again."""
    make, resume, refusal = DIRECTORY_REFUSALS[case]
    make(out := tmp_path / "out")
    flags = RESUME_FLAGS[resume]
    _refused_once(tmp_path, out, LOCAL_1, ("--batch-size", "64"), refusal, resume_flag=flags)


#: what the launcher says of a script's --resume without an output directory
NO_OUT = "--resume was given no output directory to find the checkpoint in"


@pytest.mark.timeout(120)
def test_a_resume_without_an_output_directory_is_not_restarted(tmp_path):
    """An example script given --resume and no --out: every attempt has the same flags."""
    script = REPO_ROOT / "examples" / "mixed_regression.py"
    program = (str(script), "--resume", "--epochs", "1")
    said = _launched_once(tmp_path, LOCAL_1, program, NO_OUT, "[worker 0] mixed_regression.py")
    assert "resume=True (--resume) needs an output directory" in said, said[-3000:]


def test_a_resume_without_an_output_directory_is_read_in_the_words_the_resume_writes():
    """Written there (a real fit's refusal, a Trainer without ``out_dir``), read here in each
    form: a change of those words fails this."""
    train, test = split(synthetic(n=64, num_classes=4, seed=3), 0.25, seed=3)
    with pytest.raises(CheckpointError) as refused:
        small_trainer(None).fit(train, test, epochs=1, resume=True)
    for line in _said_forms(refused.value):
        assert refused_for_good_in(["before", line]) == NO_OUT, line


def _refused_once(
    tmp_path, out, job, change, refusal, said_by=WORKER_0, resume_flag=("--resume",)
) -> str:
    """Resume ``out`` (``resume_flag``) under a launch of ``job`` (its mode and flags) with
    ``--max-restarts 2`` and ``change``: one attempt (``said_by``: the failing rank's ending,
    said once), refused for ``refusal``, which the launcher says and records, restarting none.
    What it said."""
    program = (*TRAIN[:2], "--epochs", "2", "--out", str(out), *resume_flag, *change)
    return _launched_once(tmp_path, job, program, refusal, said_by)


def _launched_once(tmp_path, job, program, refusal, said_by) -> str:
    """:func:`_refused_once`'s launch of ``program`` (its arguments) and what it checks."""
    run = tmp_path / "run"
    done = launch(*job, "--max-restarts", "2", "--run-dir", str(run), "--", *program, cwd=tmp_path)
    said = done.stderr + done.stdout
    assert done.returncode == 1, said[-3000:]
    unused = f"not restarting (--max-restarts 2): {refusal}, which every attempt would refuse"
    assert unused in done.stderr, said[-3000:]
    ended = [line for line in said.splitlines() if line.startswith(said_by)]
    assert len(ended) == 1, said[-3000:]  # one attempt
    report = json.loads((run / "failure.json").read_text())
    assert report["restart"] == 0 and report["then"] == unused, report
    assert not (run / "restarts.jsonl").exists()
    return said


@pytest.mark.parametrize(
    "line",
    [
        "distconv train: error: checkpoint /r/a b/step-1/chief.safetensors comes from a "
        "different run; resuming would not reproduce it (seed: checkpoint 0, this run 1).",
        "rank 0: CheckpointError: checkpoint /r/c.safetensors does not fit the model: "
        "parameter 'w': model shape (4,), checkpoint shape (10,); aborting the MPI job",
        "distconv train: error: rank 1, all_equal:1: pserver 127.0.0.1:5: rank 0 could not "
        "set up: CheckpointError: checkpoint /r/c.safetensors comes from a different run; "
        "resuming would not reproduce it (global_batch: checkpoint 16, this run 8). To t...",
        "distconv.checkpoint.CheckpointError: checkpoint /r/c.safetensors does not fit the "
        "model: parameter 'w': model dtype float64, checkpoint dtype float32",
    ],
)
def test_the_refusals_are_read_in_each_form_a_rank_says_them(line):
    """Each form a rank's last line takes: ``distconv train``'s, MPI's reason, a rank told of
    it by a shard, a script's traceback."""
    kinds = ("comes from a different run", "does not fit the model")
    assert refused_for_good_in(["before", line]) in [f"{RESUMED} {kind}" for kind in kinds]


@pytest.mark.parametrize(
    ("rewrite", "theirs"),
    [({}, "'1'"), ({"version": "3", BUILD_KEY: OTHER}, "'3'"), ({"version": None}, "None")],
    ids=["version 1", "another build's", "no version"],
)
def test_a_version_refusal_is_read_in_the_words_load_checkpoint_writes(tmp_path, rewrite, theirs):
    """Written there (``load_checkpoint``'s own message: distconv 0.1's version 1 file, that
    file rewritten as another build's version '3', or with no version), read here, in each
    form a rank says it. A change of those words fails this, where it would drop the
    launcher's exemption of them from ``--max-restarts``."""
    path = tmp_path / "checkpoint.safetensors"
    shutil.copyfile(VERSION_1_FILE, path)
    if rewrite:
        _rewrite_metadata(path, **rewrite)
    with pytest.raises(CheckpointVersionError) as refused:
        load_checkpoint(path)
    error = refused.value
    told = setup_failure_text(0, f"CheckpointVersionError: {error}")
    kind = f"{RESUMED} has format version {theirs} where this distconv reads version {VERSION!r}"
    for line in (
        f"distconv train: error: {error}",
        f"distconv.checkpoint.CheckpointVersionError: {error}",
        reason_text(0, f"CheckpointVersionError: {error}", "aborting the MPI job"),
        f"distconv train: error: rank 1, all_equal:1: pserver 127.0.0.1:5: {told}",
        f"my_model.py: error: CheckpointVersionError: {error}",
    ):
        assert refused_for_good_in(["before", line]) == kind, line


def test_a_version_1_run_refusal_is_read_in_the_words_run_dir_writes():
    """Written there (``distconv.legacy_run.legacy_refusal``), read here, in each form a rank
    says it: a change of those words fails this."""
    refused = legacy_refusal(Path("runs/a b"))
    told = setup_failure_text(0, f"RunDirError: {refused}")
    for line in (
        f"distconv train: error: {refused}",
        f"distconv.run_dir.RunDirError: {refused}",
        reason_text(0, f"RunDirError: {refused}", "aborting the MPI job"),
        f"distconv train: error: rank 1, all_equal:1: pserver 127.0.0.1:5: {told}",
    ):
        assert refused_for_good_in(["before", line]) == f"{RESUMED} {VERSION_1}", line


@pytest.mark.parametrize(
    "line",
    [  # a quote of the words in another failure, or the words bare (no rank said them so)
        "my_model.py: error: ValueError: retry: checkpoint x comes from a different run; "
        "resuming would not reproduce it",
        "checkpoint x does not fit the model: parameter 'w'",
        "my_model.py: error: ValueError: retry: checkpoint x has format version '3'; this "
        "distconv reads version '2': resume with the distconv that wrote it",
        "checkpoint x has format version '3'; this distconv reads version '2': resume with ...",
        "distconv.checkpoint.CheckpointDamaged: checkpoint x has format version '3'; this "
        "distconv reads version '2': ...",
        "my_model.py: error: ValueError: retry: runs/x holds a checkpoint of an older distconv "
        "(checkpoint.safetensors, format version 1, from before step checkpoints), which this "
        "version cannot resume. It holds ...",
        "my_model.py: error: ValueError: retry: runs/x already holds a run; pass --resume to "
        "continue it, --resume auto ...",
        "runs/x already holds a run; pass --resume to continue it",
        "my_model.py: error: ValueError: retry: --resume: no complete checkpoint in x",
        "--resume: no complete checkpoint in runs/x/checkpoints",
    ],
)
def test_other_lines_are_no_refused_resume(line):
    assert refused_for_good_in([line]) is None


#: a script that tries to resume, is refused, says so and trains afresh; its first attempt
#: then fails otherwise (a read error), which a restart gets past
FRESH = """\
import os, sys
print("CheckpointError: checkpoint old/step-1.json comes from a different run; resuming would "
      "not reproduce it (seed: checkpoint 0, this run 1); training afresh", flush=True)
print("epoch 1", flush=True)
if os.environ["DISTCONV_RESTART"] == "0":
    sys.exit("OSError: [Errno 5] Input/output error: 'data.npz'")
print("done")
"""


@pytest.mark.timeout(120)
def test_a_refusal_the_program_went_on_from_does_not_stop_its_restarts(tmp_path):
    """Any line of the failing rank's tail that read as a refused resume ended the job
    without a restart, though the rank had gone on from it and failed otherwise: only its
    last words (or what its peers were told) say why it failed."""
    script = tmp_path / "fresh.py"
    script.write_text(FRESH)
    run = tmp_path / "run"
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--max-restarts", "1",
        "--run-dir", str(run), "--", str(script), cwd=tmp_path,
    )  # fmt: skip
    said = done.stderr + done.stdout
    assert done.returncode == 0, said[-3000:]
    assert "not restarting" not in said, said[-3000:]
    assert "[worker 0] done" in said, said[-3000:]
    assert len((run / "restarts.jsonl").read_text().splitlines()) == 1
