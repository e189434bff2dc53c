"""A restart that finds the run's ``checkpoints`` link pointing at a disk not mounted (the node
lost with the first attempt, its replacement's mount late) says so: ``runs/x/checkpoints links to
/disk/c, which is not there (a disk not mounted yet?)`` (it said the run ``holds files that no
distconv run without one leaves (runs/x/checkpoints)``, or ``--resume: no complete checkpoint``,
words of refusals every attempt meets). That is no refusal for good: the launcher restarts it,
as it restarts an ``--out`` linked to a disk not there (``cannot be made``), and the next
attempt, the disk mounted, resumes the run. A real ``distconv-launch local`` whose first
attempt loses its disk and dies (SIGKILL); the disk comes back as its second attempt ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.refused_starts import refused_for_good_in
from tests.child_env import child_path
from tests.launcher.launch_cli import ENV, launch

#: what the rank says of a ``checkpoints`` linked to a disk not there
NOT_THERE = "which is not there (a disk not mounted yet?)"
#: of one in a loop, and of one to a mount point the run's claim records, no mount point now
LOOP = "which cannot be followed (a loop of links)"
NO_MOUNT_NOW = (
    "which was a mount point when the run began and is none now (a disk not mounted yet?)"
)
#: restart 0 loses the disk (``DISK`` renamed away) and dies at step 3, after checkpoints;
#: restart 1 puts the disk back as it exits, refused
LOSE_THE_DISK = """
import atexit, os, signal
restart, disk = os.environ.get("DISTCONV_RESTART"), os.environ.get("DISK")
if disk and restart == "0":
    from distconv import trainer
    step = trainer.Trainer.train_step
    def dying(self, *args, **kwargs):
        if self.pos.step == 3:
            os.rename(disk, disk + ".away")
            os.kill(os.getpid(), signal.SIGKILL)
        return step(self, *args, **kwargs)
    trainer.Trainer.train_step = dying
elif disk and restart == "1":
    atexit.register(os.rename, disk + ".away", disk)
"""
#: the same, the disk's mount point left behind as an empty folder (the link made to it)
UNMOUNT_THE_DISK = LOSE_THE_DISK.replace(
    'os.rename(disk, disk + ".away")', 'os.rename(disk, disk + ".away"); os.mkdir(disk)'
).replace(
    'atexit.register(os.rename, disk + ".away", disk)',
    'atexit.register(lambda: (os.rmdir(disk), os.rename(disk + ".away", disk)))',
)


def _launch_linked(
    tmp_path: Path, monkeypatch, inject: str, disk: Path, restarts: int, timeout: float,
    *flags: str,
):  # fmt: skip
    """A ``distconv-launch local`` of one worker training one synthetic epoch into
    ``tmp_path/out``, whose ``checkpoints`` links to ``disk``, with ``inject`` as each child's
    sitecustomize (it finds ``disk`` in ``DISK``), up to ``restarts`` restarts, and ``flags``."""
    folder, out = tmp_path / "inject", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    (folder / "sitecustomize.py").write_text(inject)
    (out / "checkpoints").symlink_to(disk)
    monkeypatch.setitem(ENV, "PYTHONPATH", child_path(folder))
    monkeypatch.setitem(ENV, "DISK", str(disk))
    return launch(
        "local", "--workers", "1", "--servers", "0", "--max-restarts", str(restarts),
        "--run-dir", str(tmp_path / "launch"), "--", "--data", "synthetic", "--no-progress",
        "--epochs", "1", "--out", str(out), *flags, cwd=tmp_path, timeout=timeout,
    )  # fmt: skip


@pytest.mark.timeout(200)
def test_a_restart_whose_checkpoints_disk_is_late_is_restarted(tmp_path, monkeypatch):
    disk = tmp_path / "disk"
    disk.mkdir()
    done = _launch_linked(
        tmp_path, monkeypatch, LOSE_THE_DISK, disk, 2, 150, "--batch-size", "16",
        "--checkpoint-every", "1",
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert "failed with signal SIGKILL; restarting the job (1 of 2)" in said, said[-3000:]
    assert NOT_THERE in said, said[-3000:]
    assert "not restarting" not in said and "restarting the job (2 of 2)" in said, said[-3000:]
    assert done.returncode == 0 and "resumed from" in said, said[-3000:]
    assert (disk / "step-00000024.json").is_file()


def test_a_checkpoints_link_to_a_disk_not_there_is_no_refusal_for_good():
    """Read back in the words the rank writes (``RunDirectory.check_checkpoints_there``): not
    for good; a ``checkpoints`` that is a file, or holds another tool's files, for good."""
    for words in (NOT_THERE, LOOP, NO_MOUNT_NOW):
        late = f"/r/checkpoints links to /disk/c, {words}"
        assert refused_for_good_in([f"distconv train: error: {late}"]) is None
        assert refused_for_good_in([f"distconv.run_dir.RunDirError: {late}"]) is None
    start = "distconv train: error: /r has no checkpoint to resume, and holds files that no "
    end = "distconv run without one leaves ({}), which starting afresh would delete: move them"
    for listed in ("/r/checkpoints", "/r/checkpoints/notes.txt"):
        assert refused_for_good_in([start + end.format(listed)]) == (
            "the output directory holds files that starting afresh would delete"
        )


@pytest.mark.timeout(200)
@pytest.mark.parametrize("lose", [LOSE_THE_DISK, UNMOUNT_THE_DISK], ids=["gone", "unmounted"])
def test_a_resume_whose_checkpoints_disk_is_late_on_a_restart_is_restarted(
    tmp_path, monkeypatch, lose
):
    """``--resume`` of a run whose checkpoints are on that disk: the restart, the disk gone (or
    its mount point left empty), says so, not ``--resume: no complete checkpoint in
    runs/x/checkpoints``, which (on any attempt: ``test_launch_resume_refused_once.py``) is
    refused for good."""
    inject, out, disk = tmp_path / "inject", tmp_path / "out", tmp_path / "disk"
    for folder in (inject, out, disk):
        folder.mkdir()
    (inject / "sitecustomize.py").write_text(lose.replace("== 3", "== 27"))
    (out / "checkpoints").symlink_to(disk)
    train = ("--data", "synthetic", "--batch-size", "16", "--no-progress", "--out", str(out))
    first = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(tmp_path / "first"),
        "--", *train, "--epochs", "1", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0 and (disk / "step-00000024.json").is_file(), first.stderr
    monkeypatch.setitem(ENV, "PYTHONPATH", child_path(inject))
    monkeypatch.setitem(ENV, "DISK", str(disk))
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--max-restarts", "2", "--run-dir",
        str(tmp_path / "launch"), "--", *train, "--epochs", "2", "--resume", cwd=tmp_path,
        timeout=150,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert "failed with signal SIGKILL; restarting the job (1 of 2)" in said, said[-3000:]
    assert "(a disk not mounted yet?)" in said, said[-3000:]
    assert "no complete checkpoint" not in said, said[-3000:]
    assert "not restarting" not in said and "restarting the job (2 of 2)" in said, said[-3000:]
    assert done.returncode == 0, said[-3000:]
    assert (disk / "step-00000048.json").is_file()


#: restart 0 makes the disk's folder as it exits (the disk mounted meanwhile)
MOUNT_AT_EXIT = """
import atexit, os
if os.environ.get("DISTCONV_RESTART") == "0" and os.environ.get("DISK"):
    atexit.register(os.makedirs, os.environ["DISK"])
"""


@pytest.mark.timeout(60)
def test_a_fresh_start_whose_checkpoints_disk_is_late_is_restarted_before_any_epoch(
    tmp_path, monkeypatch
):
    """A launch without ``--resume`` into a directory whose ``checkpoints`` links to a disk not
    there says so before its first step, and is restarted: it said so at its first checkpoint's
    save (``cannot write a checkpoint into ...``), an epoch late. The restart, the disk there,
    trains the one epoch: the metrics hold one line, the first attempt's none."""
    out, disk = tmp_path / "out", tmp_path / "disk" / "c"
    done = _launch_linked(tmp_path, monkeypatch, MOUNT_AT_EXIT, disk, 1, 50, "--batch-size", "32")
    said = done.stdout + done.stderr
    assert f"{out / 'checkpoints'} links to {disk}, {NOT_THERE}" in said, said[-3000:]
    assert "cannot write a checkpoint" not in said, said[-3000:]
    assert "not restarting" not in said and "restarting the job (1 of 1)" in said, said[-3000:]
    assert done.returncode == 0, said[-3000:]
    assert (out / "metrics.jsonl").read_text().count("\n") == 1
    assert (disk / "step-00000012.json").is_file()
