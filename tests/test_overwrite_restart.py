"""``--overwrite`` on a restart: the job's first start replaced the old run, so a restart
continues the run its job began, and replaces an older run only where the first start failed
before it got that far. Real files through the Trainer, then the real launcher restarting real
``distconv train`` processes."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distconv import run_dir
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.run_dir import RunDirectory, RunDirError
from distconv.sync import create_sync
from distconv.trainer import Trainer
from tests.child_env import child_path
from tests.restart_job import epochs_written, small_trainer

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "job, resumes",
    [
        (dict(job_id="j1", launch="a", restart=1), True),  # its own run: continued
        (dict(job_id="j2", launch="b", restart=1), False),  # another job's: replaced
        (dict(job_id="j1", launch="b", restart=1), False),  # another launch of j1: replaced
        (dict(job_id="j1", launch="a", restart=0), False),  # the job's first start: replaced
        (dict(job_id="j1", launch=None, restart=1), False),  # no launch: runs not told apart
    ],
)
def test_a_restart_continues_its_own_jobs_run_and_replaces_any_other(tmp_path, data, job, resumes):
    train, test = data
    out = tmp_path / "run"
    small_trainer(out, job_id="j1", launch="a").fit(train, test, epochs=1)
    assert (RunDirectory(out).latest().job, RunDirectory(out).latest().launch) == ("j1", "a")
    again = small_trainer(out, **job)
    history = again.fit(train, test, epochs=2, resume="overwrite")
    assert [r["epoch"] for r in history] == ([2] if resumes else [1, 2])
    assert epochs_written(out) == [1, 2]  # one run's log either way: continued, or replaced whole
    newest = RunDirectory(out).latest()
    assert (newest.job, newest.launch) == (job["job_id"], job["launch"])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("resume", ["overwrite", "auto"])
def test_a_checkpoints_link_to_another_disk_is_emptied_and_kept(tmp_path, data, resume):
    """``checkpoints`` a link to a directory elsewhere (a larger disk): replacing the run, or
    clearing one that never checkpointed, empties that directory and keeps the link. ``rmtree``
    refused the link ("Cannot call rmtree on a symbolic link", naming no file) after the
    metrics log was gone."""
    train, test = data
    out, store = tmp_path / "run", tmp_path / "big-disk"
    store.mkdir()
    out.mkdir()
    (out / "checkpoints").symlink_to(store)
    if resume == "overwrite":
        small_trainer(out, job_id="j1").fit(train, test, epochs=1)
    else:  # what a run that failed before its first checkpoint leaves
        (out / "metrics.jsonl").write_text("")
        (store / "step-00000003").mkdir()
        (store / "step-00000003" / "chief.safetensors").write_bytes(b"half")
    assert list(store.iterdir())
    history = small_trainer(out, job_id="j2").fit(train, test, epochs=1, resume=resume)
    assert [r["epoch"] for r in history] == [1]
    assert (out / "checkpoints").is_symlink() and (out / "checkpoints").resolve() == store
    assert sorted(p.name for p in store.iterdir()) == ["step-00000015", "step-00000015.json"]
    assert RunDirectory(out).latest().job == "j2"
    assert epochs_written(out) == [1]


@pytest.mark.timeout(60)
def test_a_run_that_cannot_be_cleared_is_a_run_dir_error_naming_the_file(tmp_path, monkeypatch):
    out = tmp_path / "run"
    (out / "checkpoints" / "step-00000015").mkdir(parents=True)

    def refuse(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr(run_dir.shutil, "rmtree", refuse)
    with pytest.raises(RunDirError) as info:
        RunDirectory(out).clear()
    assert str(info.value) == (
        f"cannot clear the run in {out}: {out / 'checkpoints'}: permission denied"
    )


def _one_part(tmp_path: Path) -> Path:
    """The one part of a run's one checkpoint, in ``tmp_path / "run"``."""
    part = tmp_path / "run" / "checkpoints" / "step-00000015" / "chief.safetensors"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"part")
    return part


def _clear_error(out: Path) -> str:
    with pytest.raises(RunDirError) as info:
        RunDirectory(out).clear()
    return str(info.value)


@pytest.mark.timeout(60)
def test_a_checkpoint_file_that_cannot_be_cleared_is_named_by_its_whole_path(tmp_path, monkeypatch):
    """A file in a step directory that cannot go (a read-only mount there) was named by its name
    alone, ``cannot clear the run in run: chief.safetensors: read-only file system``, since
    ``rmtree`` unlinks by the name in its folder: which checkpoint, not said."""
    part = _one_part(tmp_path)
    out = tmp_path / "run"
    unlink = os.unlink

    def refuse(name, *args, dir_fd=None, **kwargs):  # what a read-only mount answers
        if os.path.basename(name) == "chief.safetensors":
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), name)
        return unlink(name, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    assert _clear_error(out) == f"cannot clear the run in {out}: {part}: read-only file system"


@pytest.mark.timeout(60)
def test_a_file_that_cannot_be_cleared_is_named_in_full_by_python_313s_rmtree_too(
    tmp_path, monkeypatch
):
    """Python 3.13's ``rmtree`` calls its handler for a file it cannot unlink inside a ``try``
    whose ``except OSError`` puts the file's folder in the error and calls the handler again:
    the OSError the handler raised came back naming ``.../step-00000015``, which of its files
    not said, and the test above failed on 3.13. Its calls, on any Python."""
    part = _one_part(tmp_path)
    out, folder = tmp_path / "run", str(part.parent)

    def rmtree_313(path, onerror=None, *, onexc=None):  # shutil._rmtree_safe_fd of 3.13
        handler = onexc or (lambda function, where, exc: onerror(function, where, (None, exc)))
        try:
            refused = OSError(errno.EROFS, os.strerror(errno.EROFS), part.name)  # unlink(dir_fd)
            handler(os.unlink, str(part), refused)
        except OSError as exc:
            exc.filename = folder
            handler(os.scandir, folder, exc)

    monkeypatch.setattr(shutil, "rmtree", rmtree_313)
    assert _clear_error(out) == f"cannot clear the run in {out}: {part}: read-only file system"


@pytest.mark.timeout(120)
def test_an_overwrite_that_fails_midway_keeps_the_metrics_of_the_checkpoints_it_left(
    tmp_path, data, monkeypatch
):
    """``--overwrite`` deleted ``metrics.jsonl`` before the checkpoints: one it could not delete
    (a read-only step directory) stayed without its metrics, and a resume from it warned that
    its epochs' lines "will not be written again". Checkpoints go first."""
    train, test = data
    out = tmp_path / "run"
    small_trainer(out).fit(train, test, epochs=1)

    def refuse(path, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    with monkeypatch.context() as patch:
        patch.setattr(run_dir.shutil, "rmtree", refuse)
        with pytest.raises(RunDirError, match="read-only file system"):
            small_trainer(out).fit(train, test, epochs=2, resume="overwrite")
    assert RunDirectory(out).latest().step == 15
    assert epochs_written(out) == [1]
    assert [r["epoch"] for r in small_trainer(out).fit(train, test, epochs=2, resume=True)] == [2]
    assert epochs_written(out) == [1, 2]


#: the first start of each worker ends before training ("early") or after step 5 ("late")
CRASH_ON_FIRST_START = """
import os
if os.environ.get("DISTCONV_RESTART") == "0" and os.environ.get("CRASH") == "early":
    os._exit(3)
if os.environ.get("DISTCONV_RESTART") == "0" and os.environ.get("CRASH") == "late":
    from distconv import trainer
    step = trainer.Trainer.train_step
    def failing(self, *args):
        if self.pos.step == 5:
            os._exit(3)
        return step(self, *args)
    trainer.Trainer.train_step = failing
"""


def _launch_with_a_crash(
    tmp_path: Path, crash: str, out: Path, job: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    inject = tmp_path / "inject"
    inject.mkdir(exist_ok=True)
    (inject / "sitecustomize.py").write_text(CRASH_ON_FIRST_START)
    env = {**os.environ, "PYTHONPATH": child_path(inject), "CRASH": crash}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_RESTART", "DISTCONV_JOB_ID"):
        env.pop(name, None)
    train = ["--data", "synthetic", "--batch-size", "16", "--epochs", "2", "--no-progress"]
    return subprocess.run(
        [sys.executable, "-m", "launcher", "local", "--workers", "1", "--servers", "0",
         "--max-restarts", "1", "--run-dir", str(tmp_path / "launch"), *job,
         "--", *train, "--checkpoint-every", "2", "--out", str(out), "--overwrite"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=150,
    )  # fmt: skip


def _old_run(tmp_path: Path) -> Path:
    """A finished run of another job, with another seed, where the launched one will write."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": child_path()}
    argv = ["train", "--data", "synthetic", "--epochs", "1", "--seed", "7", "--no-progress"]
    done = subprocess.run(
        [sys.executable, "-m", "distconv", *argv, "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("crash", ["early", "late"])
def test_a_restarted_overwrite_job_never_resumes_the_run_it_replaced(tmp_path, crash):
    out = _old_run(tmp_path)
    done = _launch_with_a_crash(tmp_path, crash, out)
    assert done.returncode == 0, done.stderr
    assert "worker 0 failed with exit code 3; restarting the job (1 of 1)" in done.stderr
    resumed = [line for line in done.stdout.splitlines() if "resumed from" in line]
    if crash == "early":  # nothing of this job's yet: the old run is replaced
        assert resumed == [], done.stdout
    else:  # its own run, checkpointed at step 4: continued
        assert len(resumed) == 1 and "step-00000004" in resumed[0], done.stdout
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    assert [r["epoch"] for r in records] == [1, 2]
    assert RunDirectory(out).latest().job.startswith("launch-")


@pytest.mark.timeout(300)
def test_a_relaunch_of_the_same_job_id_never_resumes_the_run_it_replaces(tmp_path):
    """A job launched again with its --job-id (as operations.md suggests after a launcher crash)
    and --overwrite, whose first start fails before training: the newest checkpoint carries
    the job's id but an earlier launch's token, so the restart replaces that run."""
    out = tmp_path / "run"
    first = _launch_with_a_crash(tmp_path, "none", out, ("--job-id", "exp1"))
    assert first.returncode == 0, first.stderr
    assert RunDirectory(out).latest().job == "exp1"
    done = _launch_with_a_crash(tmp_path, "early", out, ("--job-id", "exp1"))
    assert done.returncode == 0, done.stderr
    assert "restarting the job (1 of 1)" in done.stderr
    assert [line for line in done.stdout.splitlines() if "resumed from" in line] == []
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    assert [r["epoch"] for r in records] == [1, 2]


@pytest.mark.timeout(60)
def test_a_checkpoints_link_holding_foreign_files_is_refused_before_anything_is_deleted(tmp_path):
    """``checkpoints`` linked to a directory outside the run (a disk's top, a shared folder):
    ``--overwrite`` emptied it whole, deleting files no run writes there. It is
    refused naming them, with the run's files still in place."""
    out, disk = tmp_path / "run", tmp_path / "big-disk"
    (disk / "step-00000015").mkdir(parents=True)
    (disk / "step-00000015" / "chief.safetensors").write_bytes(b"part")
    (disk / "step-00000015.json").write_text("{}")
    (disk / "datasets").mkdir()
    (disk / "datasets" / "train.csv").write_text("precious")
    out.mkdir()
    (out / "checkpoints").symlink_to(disk)
    (out / "metrics.jsonl").write_text('{"epoch": 1}\n')
    with pytest.raises(RunDirError, match=r"holds files no distconv run writes") as info:
        RunDirectory(out).clear()
    assert str(out / "checkpoints" / "datasets") in str(info.value)
    assert (disk / "datasets" / "train.csv").read_text() == "precious"
    assert (disk / "step-00000015" / "chief.safetensors").exists()
    assert (out / "metrics.jsonl").exists()


@pytest.mark.timeout(60)
def test_a_metrics_file_linked_to_a_directory_loses_the_link_not_the_directorys_files(tmp_path):
    """Only ``checkpoints`` is emptied through its link; the plot or the metrics log linked to a
    directory had that directory emptied too."""
    out, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("precious")
    out.mkdir()
    (out / "metrics.png").symlink_to(elsewhere)
    RunDirectory(out).clear()
    assert not os.path.lexists(out / "metrics.png")
    assert (elsewhere / "keep.txt").read_text() == "precious"


@pytest.mark.timeout(120)
def test_a_scripts_restart_with_overwrite_continues_its_launchs_run(tmp_path, data, monkeypatch):
    """A Trainer given no start (a script's own, as the examples make one with --overwrite)
    recorded no launch: restarted by distconv-launch, it replaced the run its own first start
    had begun and trained it again from epoch 1."""
    train, test = data
    out = tmp_path / "run"

    def fit(epochs: int) -> list[int]:
        set_seed(0)
        net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
        sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
        trainer = Trainer(net, sync, 16, out_dir=out, progress=False)
        return [r["epoch"] for r in trainer.fit(train, test, epochs, resume="overwrite")]

    monkeypatch.setenv("DISTCONV_LAUNCH", "launch-a")
    monkeypatch.setenv("DISTCONV_RESTART", "0")
    assert fit(1) == [1]
    monkeypatch.setenv("DISTCONV_RESTART", "1")  # the same launch, started again: continued
    assert fit(2) == [2]
    assert epochs_written(out) == [1, 2]
    monkeypatch.setenv("DISTCONV_LAUNCH", "launch-b")  # another launch: its run replaced
    assert fit(1) == [1]
    assert epochs_written(out) == [1]
