"""A restart whose first start died before its first complete checkpoint starts afresh.

A restart given no ``--resume`` continues only its own launch's run, told by the launch token in
the newest complete checkpoint's manifest. A first start that died after writing
run files but before that checkpoint (its first epoch's metrics line, a step directory whose
manifest never came) left no manifest, so its restart refused its own leftovers ("already holds
a run") and a job with ``--max-restarts`` that crashed early could never restart (earlier,
the launcher's added ``--resume auto`` started it afresh). A fresh run now records its job and
launch in ``<out>/run.claim`` when it takes the directory, and a restart with no complete
checkpoint consults it. Real files through the Trainer, then the real launcher restarting real
``distconv train`` processes killed with SIGKILL (one and two ranks).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.resume import StepCheckpoints
from distconv.run_dir import RunDirectory, RunDirError
from tests.child_env import child_path
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.restart_job import epochs_written, small_trainer
from tests.test_restart_resume import ENV, REFUSED, TRAIN, _launch

CLAIM = "run.claim"


class Died(Exception):
    """Stands for the SIGKILL that ends a first start before its first checkpoint."""


def _die_in(where: str):
    """A replacement for ``StepCheckpoints.save`` that dies before saving (``"save"``: the epoch's
    metrics line is on disk, nothing of its checkpoint) or once the part is written, before the
    manifest (``"commit"``: a step directory no manifest names)."""
    save = StepCheckpoints.save

    def dying(self, *args):
        if where == "save":
            raise Died
        commit, discard = self.run.commit, self.run.discard

        def no_manifest(*a, **k):
            raise Died

        # SIGKILL cleans nothing up: the step directory stays, as no exception would leave it
        self.run.commit, self.run.discard = no_manifest, lambda step: None
        try:
            save(self, *args)
        finally:
            self.run.commit, self.run.discard = commit, discard

    return dying


def _first_start_dies(out: Path, data, where: str, monkeypatch, **job) -> None:
    train, test = data
    with monkeypatch.context() as patch:
        patch.setattr(StepCheckpoints, "save", _die_in(where))
        with pytest.raises(Died):
            small_trainer(out, **job).fit(train, test, epochs=2)
    assert epochs_written(out) == [1] and RunDirectory(out).latest() is None
    assert RunDirectory(out).holds_run()  # what the restart could not tell from another run


def _claim(out: Path) -> dict:
    return json.loads((out / CLAIM).read_text())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["save", "commit"])
def test_a_restart_of_its_own_launch_starts_afresh_where_no_checkpoint_was_complete(
    tmp_path, data, where, monkeypatch
):
    """The leftovers are cleared; the run keeps its claim (re-recorded after the clearing), so
    a second early death is restarted too, and then its own checkpoints."""
    train, test = data
    out = tmp_path / "run"
    _first_start_dies(out, data, where, monkeypatch, job_id="j1", launch="a")
    assert _claim(out) == {"job": "j1", "launch": "a"}
    if where == "commit":
        assert (out / "checkpoints" / "step-00000015" / "chief.safetensors").is_file()
    history = small_trainer(out, job_id="j1", launch="a", restart=1).fit(train, test, epochs=2)
    assert [r["epoch"] for r in history] == [1, 2]  # afresh: epoch 1 trained again
    assert epochs_written(out) == [1, 2]  # the dead start's line went with its leftovers
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == ["step-00000015", "step-00000015.json", "step-00000030", "step-00000030.json"]
    assert _claim(out) == {"job": "j1", "launch": "a"}
    newest = RunDirectory(out).latest()
    assert (newest.step, newest.job, newest.launch) == (30, "j1", "a")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "job",
    [
        dict(job_id="j1", launch="b", restart=1),  # another launch of j1
        dict(job_id="j2", launch="a", restart=1),  # another job
        dict(job_id="j1", launch="a", restart=0),  # a first start: never continues anything
        dict(job_id="j1", launch=None, restart=1),  # no launch: runs not told apart
    ],
)
def test_another_launchs_unfinished_run_is_refused_and_kept(tmp_path, data, job, monkeypatch):
    train, test = data
    out = tmp_path / "run"
    _first_start_dies(out, data, "save", monkeypatch, job_id="j1", launch="a")
    with pytest.raises(RunDirError) as info:
        small_trainer(out, **job).fit(train, test, epochs=2)
    assert str(info.value).startswith(f"{out} {REFUSED}")
    assert epochs_written(out) == [1] and _claim(out) == {"job": "j1", "launch": "a"}


@pytest.mark.timeout(120)
def test_an_unclaimed_unfinished_run_of_an_earlier_version_is_refused_as_before(
    tmp_path, data, monkeypatch
):
    """A run directory without a claim (written by a distconv before claims): nothing tells
    whose leftovers these are, so even a restart of the same launch is refused, as before."""
    train, test = data
    out = tmp_path / "run"
    _first_start_dies(out, data, "save", monkeypatch, job_id="j1", launch="a")
    (out / CLAIM).unlink()
    with pytest.raises(RunDirError) as info:
        small_trainer(out, job_id="j1", launch="a", restart=1).fit(train, test, epochs=2)
    assert str(info.value).startswith(f"{out} {REFUSED}")
    assert epochs_written(out) == [1]


@pytest.mark.timeout(120)
def test_a_claim_alone_is_no_run_and_the_next_fresh_run_claims_the_directory(
    tmp_path, data, monkeypatch
):
    """A start that died in its first epoch leaves an empty metrics log and its claim: no run,
    so another launch starts afresh there (as without claims) and records itself; replacing a
    run (``--overwrite``) records the new one too."""
    train, test = data
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr("distconv.trainer.run_epoch", _raise_died)  # dies in its first epoch
        with pytest.raises(Died):
            small_trainer(out, job_id="j1", launch="a").fit(train, test, epochs=1)
    assert _claim(out) == {"job": "j1", "launch": "a"} and not RunDirectory(out).holds_run()
    small_trainer(out, job_id="j2", launch="b").fit(train, test, epochs=1)
    assert _claim(out) == {"job": "j2", "launch": "b"}
    small_trainer(out, job_id=None, launch="c").fit(train, test, epochs=1, resume="overwrite")
    assert _claim(out) == {"job": None, "launch": "c"}
    assert epochs_written(out) == [1]


def _raise_died(*args, **kwargs):
    raise Died


#: the first start (DISTCONV_RESTART 0) SIGKILLs itself once its first epoch's metrics line is
#: on disk: before its checkpoint (KILL_AT=save), or with the part written, before the manifest
#: (KILL_AT=commit)
KILL_BEFORE_FIRST_CHECKPOINT = """
import os, signal
if os.environ.get("DISTCONV_RESTART") == "0":
    from distconv import run_dir, resume
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ["KILL_AT"] == "save":
        save = resume.StepCheckpoints.save
        def save_or_die(self, *args):
            if self.run is not None:
                die()
            save(self, *args)
        resume.StepCheckpoints.save = save_or_die
    else:
        run_dir.RunDirectory.commit = die
"""


def _killed_early_env(tmp_path: Path, where: str) -> dict[str, str]:
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(KILL_BEFORE_FIRST_CHECKPOINT)
    return {**ENV, "PYTHONPATH": child_path(inject), "KILL_AT": where}


def _assert_started_afresh(done: subprocess.CompletedProcess, out: Path, steps: int) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "restarting the job (1 of 1)" in done.stderr, done.stderr
    assert REFUSED not in done.stdout + done.stderr
    assert "resumed from" not in done.stdout
    assert epochs_written(out) == [1, 2]
    newest = RunDirectory(out).latest()
    assert newest.step == 2 * steps and newest.launch is not None
    assert _claim(out)["launch"] == newest.launch  # the launch that began it, kept


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["save", "commit"])
def test_a_train_killed_before_its_first_checkpoint_is_restarted_afresh(tmp_path, where):
    """``distconv-launch local --max-restarts 1``, no ``--resume``: the first start SIGKILLed
    after its first metrics line (384 synthetic examples / 16: 24 steps an epoch)."""
    out = tmp_path / "run"
    program = (*TRAIN, "--epochs", "2", "--out", str(out))
    done = _launch(tmp_path, *program, env=_killed_early_env(tmp_path, where))
    assert "failed with signal SIGKILL" in done.stderr, done.stderr
    _assert_started_afresh(done, out, 24)


@pytest.mark.timeout(300)
def test_an_mpi_job_killed_before_its_first_checkpoint_is_restarted_afresh(tmp_path):
    """Under ``distconv-launch mpi -np 2`` rank 0 alone reads the claim and decides; rank 1
    takes its (fresh) position. Rank 0 SIGKILLed after its first metrics line (384 examples /
    a global batch of 32: 12 steps an epoch); both restarted ranks train both epochs."""
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "mpi", "-np", "2", "--max-restarts", "1",
         "--run-dir", str(tmp_path / "launch"), "--", *TRAIN, "--epochs", "2", "--out", str(out)],
        env=_killed_early_env(tmp_path, "save"), cwd=tmp_path, capture_output=True, text=True,
        timeout=200,
    )  # fmt: skip
    assert "died of signal 9 (SIGKILL)" in done.stderr, done.stderr  # "rank 0" where alone
    _assert_started_afresh(done, out, 12)
    for epoch in (1, 2):
        trained = [line for line in done.stdout.splitlines() if f"epoch {epoch}/2" in line]
        assert len(trained) == 2, done.stdout  # both ranks, on the restart


@pytest.mark.timeout(200)
@pytest.mark.parametrize(
    "launch, starts",
    [pytest.param("a", True, marks=NEEDS_MPIEXEC), pytest.param("b", False, marks=NEEDS_MPIEXEC)],
)
def test_under_mpi_rank_0_alone_reads_the_claim_and_every_rank_follows(
    tmp_path, data, monkeypatch, launch, starts
):
    """``distconv train`` under ``mpiexec -n 2`` restarted (``DISTCONV_RESTART=1``) where launch
    ``a`` of job ``j1`` died before its first checkpoint: rank 0 reads the claim; rank 1, which
    has no run directory, starts afresh with it (``a``) or stops with it (``b``)."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    out = tmp_path / "run"
    _first_start_dies(out, data, "save", monkeypatch, job_id="j1", launch="a")
    for name, value in (("DISTCONV_JOB_ID", "j1"), ("DISTCONV_LAUNCH", launch)):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DISTCONV_RESTART", "1")
    done = run_mpi(
        ["-n", "2", sys.executable, "-m", "mpi4py", "-m", "distconv", "train", "--sync", "mpi",
         *TRAIN, "--epochs", "1", "--out", str(out)],
        timeout=150,
    )  # fmt: skip
    said = done.stdout + done.stderr
    if starts:
        assert done.returncode == 0, said
        trained = [line for line in said.splitlines() if "epoch 1/1" in line]
        assert len(trained) == 2, said  # both ranks, afresh
        assert epochs_written(out) == [1] and RunDirectory(out).latest().launch == "a"
    else:
        assert done.returncode == 1, said
        assert REFUSED in said and "epoch 1/1" not in said
        assert epochs_written(out) == [1] and RunDirectory(out).latest() is None
    assert _claim(out) == {"job": "j1", "launch": "a"}
