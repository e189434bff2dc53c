"""What a run stopped by SIGTERM says before its stop line: the checkpoint that holds its step
and the command that goes on from it. ``distconv train`` and a script's ``run_main`` ended on
``stopped by SIGTERM after step N`` alone, and a user at a plain terminal (no launcher, whose
report says how to go on) was told neither where the work was kept nor how to continue it.

Real ``distconv train`` subprocesses and a real script, stopped by a real SIGTERM mid-epoch;
the command they print is run through a shell and must resume the run."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.run_dir import RunDirectory
from distconv.stop_kept import train_resume_words, without_resume_flags
from launcher.own_stop import stop_said
from tests.child_env import child_env
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.processes import job_env, run_job

pytestmark = pytest.mark.timeout(120)

#: a run of two epochs of 384 steps (about a second each): a SIGTERM at the first epoch's line
#: lands well inside the second, and the resume has the rest of it to train
TRAIN = ("--data", "synthetic", "--batch-size", "1", "--no-progress", "--epochs", "2")
#: the steps the two epochs take
LAST_STEP = 768
#: ``distconv train``'s lines before its stop line
KEPT = re.compile(r"distconv train: the checkpoint of step (\d+) is kept in (\S+)")
GO_ON = "distconv train: to go on: "


def _stopped_train(cwd: Path, *flags: str, **env: str) -> tuple[int, list[str]]:
    """``python -m distconv train`` with :data:`TRAIN` and ``flags`` in ``cwd``, stopped by
    SIGTERM once its first epoch is logged; its exit status and the lines of its stderr."""
    return _stopped(cwd, [sys.executable, "-m", "distconv", "train", *TRAIN, *flags], **env)


def _stopped(cwd: Path, argv: list[str], **env: str) -> tuple[int, list[str]]:
    """``argv``, a ``distconv train`` of :data:`TRAIN`'s two epochs, run in ``cwd`` and stopped
    by SIGTERM once its first epoch is logged; its exit status and the lines of its stderr."""
    with job_env(child_env(**env)) as job:
        child = subprocess.Popen(argv, env=job, cwd=cwd, stderr=subprocess.PIPE, text=True)
        try:
            lines = []
            for line in child.stderr:
                lines.append(line.rstrip("\n"))
                if "epoch 1/2" in line:
                    child.send_signal(signal.SIGTERM)
                    break
            _, rest = child.communicate(timeout=60)
        finally:
            child.kill()
            child.wait()
    return child.returncode, lines + (rest or "").splitlines()


def _step_said(line: str) -> int | None:
    """The step a stop line says, as the launcher reads it (None: no stop line)."""
    said = stop_said([line])
    return None if said is None else said.step


def _in_shell(command: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """``command`` as a user pastes it into a shell, in ``cwd`` (``env``: its own there)."""
    return run_job(["bash", "-c", command], env=child_env(**env), timeout=60, cwd=cwd)


def _newest_step(out: Path) -> int:
    newest = RunDirectory(out).latest()
    assert newest is not None, f"no complete checkpoint in {out}"
    return newest.step


def test_a_stopped_train_names_its_checkpoint_and_the_command_that_resumes_it(tmp_path):
    status, lines = _stopped_train(tmp_path, "--out", "run")
    assert status == 143, lines
    step = _step_said(lines[-1])
    assert lines[-1] == f"distconv train: stopped by SIGTERM after step {step}", lines[-3:]
    assert step is not None and 384 < step < LAST_STEP, lines[-3:]  # inside the second epoch
    kept = KEPT.fullmatch(lines[-3])
    assert kept is not None, lines[-3:]
    assert int(kept[1]) == step == _newest_step(tmp_path / "run")
    assert kept[2] == f"run/checkpoints/step-{step:08d}/chief.safetensors"
    assert (tmp_path / kept[2]).is_file()
    command = lines[-2].removeprefix(GO_ON)
    assert lines[-2].startswith(GO_ON), lines[-3:]
    assert command == f"{sys.executable} -m distconv train {' '.join(TRAIN)} --out run --resume"

    resumed = _in_shell(command, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resumed from {kept[2]} at step {step}, " in resumed.stderr, resumed.stderr[-2000:]
    assert _newest_step(tmp_path / "run") == LAST_STEP  # trained on from step N + 1 to the end
    epochs = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in epochs] == [1, 2]


def test_the_command_names_the_default_out_and_drops_overwrite(tmp_path):
    """A run into the default ``--out``, started with ``--overwrite``: the same command again
    would delete the run it is meant to continue, and a later default may name another
    folder. The command names the folder, and ``--resume`` stands where ``--overwrite`` was."""
    status, lines = _stopped_train(tmp_path, "--overwrite")
    assert status == 143, lines
    out = "runs/synthetic-adam-seed0"
    assert lines[-2] == (
        f"{GO_ON}{sys.executable} -m distconv train {' '.join(TRAIN)} --out {out} --resume"
    )
    assert (tmp_path / KEPT.fullmatch(lines[-3])[2]).is_file()


def test_under_a_json_log_each_line_is_json_with_the_checkpoint_and_command_as_keys(tmp_path):
    status, lines = _stopped_train(tmp_path, "--out", "run", "--log-format", "json")
    assert status == 143, lines
    entries = [json.loads(line) for line in lines]
    *_, kept, go_on, stop = entries
    step = _step_said(stop["message"])
    assert stop["message"] == f"distconv train: stopped by SIGTERM after step {step}"
    assert kept["checkpoint"] == f"run/checkpoints/step-{step:08d}/chief.safetensors"
    assert (tmp_path / kept["checkpoint"]).is_file() and kept["out"] == "run"
    assert kept["message"] == f"distconv train: the checkpoint of step {step} is kept in run/" + (
        f"checkpoints/step-{step:08d}/chief.safetensors"
    )
    assert go_on["message"] == GO_ON + go_on["command"]
    assert go_on["command"].endswith(" --out run --log-format json --resume")


def test_under_the_launcher_the_checkpoint_is_named_and_the_way_on_left_to_it(tmp_path):
    """A rank ``distconv-launch`` started (``DISTCONV_LAUNCH``): the launcher's report says how
    to go on, with the ``--job-id`` a plain command lacks; the rank does not say it twice."""
    status, lines = _stopped_train(tmp_path, "--out", "run", DISTCONV_LAUNCH="L1")
    assert status == 143, lines
    assert KEPT.fullmatch(lines[-2]) is not None, lines[-3:]
    assert not any(line.startswith(GO_ON) for line in lines)


#: a script as the examples are written (``distconv.script_flags``' flags, ``run_main``),
#: that sends itself SIGTERM after its step 2 unless it resumes
SCRIPT = """\
import argparse, signal, sys
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network
from distconv.script_flags import add_run_flags
sys.path.insert(0, {root!r})
from tests.signals import signal_at


def main():
    parser = argparse.ArgumentParser()
    add_run_flags(parser, epochs=3, batch_size=16)
    args = parser.parse_args()
    sync = dist.init("sgd", lr=0.01)
    set_seed(0)
    net = Network()
    net.add("out", FullyConnected(4, 1), "x")
    net.add("loss", MSELoss(), ["out", "target"])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    data = {{"x": x, "target": rng.standard_normal((64, 1)).astype(np.float32)}}
    try:
        trainer = Trainer(net, sync, args.batch_size, out_dir=args.out, progress=False)
        if args.resume is not True:
            signal_at(trainer, 2, signal.SIGTERM)
        trainer.fit(data, epochs=args.epochs, resume=args.resume)
    finally:
        sync.close()


dist.run_main(main)
"""


def _stopped_script(cwd: Path, *flags: str) -> list[str]:
    """The lines on stderr of :data:`SCRIPT` run in ``cwd`` with ``flags``, stopped."""
    script = cwd / "script.py"
    script.write_text(SCRIPT.format(root=str(Path(__file__).resolve().parents[1])))
    done = run_job([sys.executable, "script.py", *flags], env=child_env(), timeout=60, cwd=cwd)
    assert done.returncode == 143, done.stderr[-2000:]
    return done.stderr.splitlines()


def test_a_stopped_script_names_its_checkpoint_file_and_the_command_that_resumes_it(tmp_path):
    """The file, as ``distconv train`` names it: the Trainer's note named its folder alone."""
    lines = _stopped_script(tmp_path, "--out", "out", "--overwrite")
    assert lines[-3:] == [
        "script.py: the checkpoint of step 2 is kept in out/checkpoints/step-00000002/"
        "chief.safetensors",
        f"script.py: to go on: {sys.executable} script.py --out out --resume",
        "script.py: stopped by SIGTERM after step 2",
    ]
    resumed = _in_shell(lines[-2].removeprefix("script.py: to go on: "), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert _newest_step(tmp_path / "out") == 12  # 3 epochs of 4 steps, on from step 2


def test_a_script_not_given_a_resume_flag_is_told_the_command_as_a_guess(tmp_path):
    """Its parser is not known: it may take no ``--resume``."""
    lines = _stopped_script(tmp_path, "--out", "out")
    assert lines[-2] == (
        "script.py: to go on (if the script takes distconv.script_flags' --resume): "
        f"{sys.executable} script.py --out out --resume"
    )


def test_a_script_that_saved_nothing_says_so_and_no_command(tmp_path):
    """Without ``out_dir`` a stop keeps nothing a new process could resume from: the Trainer's
    note spoke of a resume in memory, which a process that ends has none of."""
    lines = _stopped_script(tmp_path)
    assert lines[-2:] == [
        "script.py: nothing saved (the Trainer had no out_dir, --out): a new run of the script "
        "starts afresh",
        "script.py: stopped by SIGTERM after step 2",
    ]


@NEEDS_MPIEXEC[0]  # marked mpi
@NEEDS_MPIEXEC[1]  # skipped where there is no mpiexec
def test_a_script_of_two_ranks_says_what_it_kept_once_with_this_rank_s_command(tmp_path):
    """Every rank said the Trainer's note and the command, and the command read as every
    rank's: the chief alone says them, naming its own command as the one rank's it is. Two
    steps an epoch on two ranks: both signalled after step 2, they agree at the fit's last."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(root=str(Path(__file__).resolve().parents[1])))
    out = tmp_path / "out"
    done = run_mpi(["-n", "2", sys.executable, str(script), "--out", str(out)], timeout=100)
    assert done.returncode == 143, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    kept = [line for line in lines if " is kept in " in line]
    assert kept == [
        f"script.py: the checkpoint of step 6 is kept in {out}/checkpoints/step-00000006/"
        "chief.safetensors"
    ], lines[-6:]
    go_on = [line for line in lines if "to go on" in line]
    assert go_on == [
        "script.py: to go on, start the job's 2 ranks again as before, with --resume (if the "
        "script takes distconv.script_flags' --resume); this rank's command: "
        f"{sys.executable} {script} --out {out} --resume"
    ], lines[-6:]
    assert lines.count("script.py: stopped by SIGTERM after step 6") == 2, lines[-6:]
    assert not any("fit(..., resume=True)" in line for line in lines), lines[-6:]


def test_a_train_run_from_main_s_own_words_names_them_not_the_process_s(tmp_path):
    """``distconv.cli.main([...])`` in a process of its own making (a notebook's, a test's):
    the command was the process's (``python -c ...``, without the run's flags), which ran a
    fresh run refused in the run's folder. It is ``distconv`` with the words ``main`` got,
    where a ``distconv`` is on ``PATH`` (one of the test's own: a clone run from its folder,
    not installed, has none), and the pasted line resumes the run."""
    call = ["train", *TRAIN, "--out", "run"]
    code = f"import sys; from distconv.cli import main; sys.exit(main({call!r}))"
    path = f"{_distconv_on_path(tmp_path / 'bin')}{os.pathsep}{os.environ.get('PATH', '')}"
    status, lines = _stopped(tmp_path, [sys.executable, "-c", code], PATH=path)
    assert status == 143, lines
    command = f"distconv train {' '.join(TRAIN)} --out run --resume"
    assert lines[-2] == f"{GO_ON}{command}", lines[-3:]
    assert _in_shell(command, tmp_path, PATH=path).returncode == 0  # it resumes the run


def _distconv_on_path(folder: Path) -> Path:
    """``folder``, made, holding a ``distconv`` command that runs this interpreter's
    ``-m distconv``, as the installed one does."""
    folder.mkdir()
    command = folder / "distconv"
    command.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m distconv "$@"\n')
    command.chmod(0o755)
    return folder


def test_main_s_words_are_said_after_python_m_where_no_distconv_is_on_the_path(tmp_path):
    """A notebook's kernel started without its environment's ``bin`` on ``PATH``: the
    ``distconv`` said before ``main``'s words was no command there; this interpreter's
    ``-m distconv`` is, and the pasted line resumes the run."""
    call = ["train", *TRAIN, "--out", "run"]
    code = f"import sys; from distconv.cli import main; sys.exit(main({call!r}))"
    status, lines = _stopped(tmp_path, [sys.executable, "-c", code], PATH=str(tmp_path / "bin"))
    assert status == 143, lines
    command = f"{sys.executable} -m distconv train {' '.join(TRAIN)} --out run --resume"
    assert lines[-2] == f"{GO_ON}{command}", lines[-3:]
    assert _in_shell(command, tmp_path).returncode == 0  # it resumes the run


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (["--resume", "auto", "--out", "x"], ["--out", "x"]),
        (["--resume=auto", "--epochs", "3"], ["--epochs", "3"]),
        (["--resume", "--out", "x"], ["--out", "x"]),
        (["--overw", "--res", "--epochs", "3"], ["--epochs", "3"]),  # argparse's abbreviations
        (["--out", "auto", "--resume"], ["--out", "auto"]),  # another flag's value stays
        (["--o", "x"], ["--o", "x"]),  # --out or --overwrite: argparse refused it, kept as typed
    ],
)
def test_a_train_command_line_loses_its_resume_flags_alone(args, kept):
    options = ["--out", "--overwrite", "--resume", "--epochs", "--optimizer"]
    assert without_resume_flags(args, options) == kept


def test_a_script_s_positional_argument_after_its_own_resume_flag_stays():
    """A script whose own ``--resume`` takes no value (``store_true``), given ``--resume
    data/``: ``data/`` was taken for the flag's value and dropped from the command."""
    assert without_resume_flags(["--resume", "data/", "--epochs", "3"]) == [
        "data/",
        "--epochs",
        "3",
    ]
    assert without_resume_flags(["--resume", "auto", "data/"]) == ["data/"]


def test_a_script_command_line_loses_only_the_resume_flags_written_in_full():
    """A script's parser is not known: ``--res`` may be its own ``--restarts``."""
    assert without_resume_flags(["--res", "1", "--overwrite", "--resume", "auto", "--", "x"]) == [
        "--res",
        "1",
        "--",
        "x",
    ]


def test_a_train_command_after_options_keeps_them_before_train(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["distconv", "-q", "train", "--resume", "auto"])
    words = train_resume_words("runs/a b", out_given=False)
    assert words[1:] == ["-q", "train", "--out", "runs/a b", "--resume"]
