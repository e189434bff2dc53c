"""``-- /path/to/distconv train ...``, this install's console script by its path (``$(which
distconv) train``), is the launch's own train, as the bare word ``distconv train`` is: it ran
as a program of the user's, in ./runs and past the launch's checks (``--rank`` after ``--``).
Only a path to the very file the bare word runs, or to this Python's console script, counts:
a copy, or another install's ``distconv``, stays a program of the user's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.commands import (
    Program,
    UsageError,
    names_a_program,
    parse_program,
    refuse_owned_flags,
)
from launcher.owned import LOCAL_OWNED
from launcher.pyenv_shim import forget
from tests.launcher.launch_cli import ENV, usage_refusal, wait_while_running
from tests.launcher.pyenv_fake import SCRIPT, TRAIN, fake_pyenv, needs_script
from tests.processes import MARK, job_env, job_left, run_job

#: the console script this Python installed for distconv (pip's ``distconv`` entry point)


@needs_script
def test_this_installs_console_script_by_its_path_or_a_link_is_the_launchs_train(tmp_path):
    link = tmp_path / "dc"
    link.symlink_to(SCRIPT)
    for path in (str(SCRIPT), str(link)):
        assert parse_program([path, *TRAIN]) == Program(("--epochs", "1"), is_train=True)
    with pytest.raises(UsageError, match="--rank after --"):  # the launch's checks apply
        refuse_owned_flags(
            parse_program([str(link), *TRAIN, "--rank", "1"]), LOCAL_OWNED, "pserver"
        )


@needs_script
def test_a_copy_of_the_console_script_stays_a_program_of_the_users(tmp_path):
    copy = tmp_path / "distconv"
    shutil.copy2(SCRIPT, copy)  # the same text, another install's place: not this one
    assert not parse_program([str(copy), *TRAIN]).is_train


def test_the_file_the_bare_word_runs_on_path_is_the_launchs_own(tmp_path, monkeypatch):
    """The bare word ``distconv`` is the launch's own whichever file PATH finds for it; that
    file by its path is then the same, and one of that name elsewhere is not."""
    on_path, elsewhere = tmp_path / "bin", tmp_path / "other"
    for folder in (on_path, elsewhere):
        folder.mkdir()
        (folder / "distconv").write_text("#!/bin/sh\n")
        (folder / "distconv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{on_path}{os.pathsep}{os.environ['PATH']}")
    assert parse_program([str(on_path / "distconv"), *TRAIN]).is_train
    assert not parse_program([str(elsewhere / "distconv"), *TRAIN]).is_train


@needs_script
def test_the_console_script_before_the_dashes_is_told_to_drop_as_the_bare_word(capsys):
    """``local ... /path/to/distconv train --epochs 1``, ``--`` left out: told, as of the bare
    word, that the launch runs train itself, not to put the path after ``--``."""
    local = ("local", "--workers", "1", "--servers", "0")
    said = usage_refusal(capsys, *local, str(SCRIPT), *TRAIN)
    assert said.endswith(
        f"(the launcher runs distconv train itself: drop {SCRIPT} train (distconv-launch local "
        "--workers 1 --servers 0 -- --epochs 1), or put a program after --)"
    ), said


@pytest.fixture(autouse=True)
def _no_pyenv_answers() -> None:
    """Each test a launch of its own: no ``pyenv which`` answer kept from another's."""
    forget()


@needs_script
@pytest.mark.parametrize("where", ["PYENV_ROOT", "~/.pyenv"])
def test_a_pyenv_shim_is_this_installs_where_pyenv_runs_this_pythons_script(
    tmp_path, monkeypatch, where
):
    """``$(which distconv)`` under pyenv is its shim, the same file for every Python version:
    it ran as a program of the user's. It is the launch's train where ``pyenv which distconv``
    names this Python's console script, and only then: another version's, a pyenv that
    fails, or one that hangs past :data:`launcher.pyenv_shim.WHICH_BOUND`, stays the user's.
    """
    import launcher.pyenv_shim

    if where == "PYENV_ROOT":
        root = tmp_path / "pyenv"
        monkeypatch.setenv("PYENV_ROOT", str(root))
    else:
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.delenv("PYENV_ROOT", raising=False)
        root = tmp_path / ".pyenv"
    shim = fake_pyenv(root, f"echo {SCRIPT}")
    assert parse_program([str(shim), *TRAIN]) == Program(("--epochs", "1"), is_train=True)
    other = tmp_path / "other" / "distconv"  # another version's console script
    other.parent.mkdir()
    shutil.copy2(SCRIPT, other)
    monkeypatch.setattr(launcher.pyenv_shim, "WHICH_BOUND", 0.3)
    for which in (f"echo {other}", "exit 1", "exec sleep 5"):
        (root / "libexec" / "pyenv").write_text(f'#!/bin/sh\n[ "$1" = which ] && {which}\n')
        forget()  # a launch of its own: pyenv is asked once a launch
        assert not parse_program([str(shim), *TRAIN]).is_train, which


@needs_script
def test_a_shim_of_a_pyenv_installed_apart_from_its_root_asks_the_pyenv_it_runs(
    tmp_path, monkeypatch
):
    """A shim execs the pyenv that wrote it, which Homebrew installs apart from its root
    (``/opt/homebrew/Cellar/pyenv/V/libexec/pyenv``), with the root it exports, which need not
    be ``$PYENV_ROOT`` or ``~/.pyenv`` here: ``$ROOT/libexec/pyenv`` was asked (there is none),
    so this Python's shim ran as a program of the user's; and a root the environment did not
    name left the shim unread, so, PATH's ``distconv``, it counted as this install's whichever
    version it ran."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PYENV_ROOT", raising=False)
    root, cellar = tmp_path / "root", tmp_path / "cellar"
    # this Python's script where pyenv runs with the shim's root, as the shim runs it
    asked = f'[ "$PYENV_ROOT" = "{root}" ] && echo {SCRIPT}'
    shim = fake_pyenv(root, asked, install=cellar)
    assert parse_program([str(shim), *TRAIN]) == Program(("--epochs", "1"), is_train=True)
    other = tmp_path / "other" / "distconv"  # another version's console script
    other.parent.mkdir()
    shutil.copy2(SCRIPT, other)
    fake_pyenv(root, f"echo {other}", install=cellar)
    forget()  # a launch of its own: pyenv is asked once a launch
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    assert shutil.which("distconv") == str(shim)
    assert not parse_program([str(shim), *TRAIN]).is_train


def test_pyenv_is_not_asked_of_a_shim_of_another_name(tmp_path, monkeypatch):
    """``-- ~/.pyenv/shims/python3 train.py``: pyenv was asked which file the shim runs, to
    tell whether it is distconv, twice a launch, up to its 2 s bound each where pyenv hangs;
    a shim of another name runs no distconv, and pyenv is not asked."""
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    asked = tmp_path / "asked"
    shim = fake_pyenv(tmp_path, f"echo {SCRIPT}")
    (tmp_path / "libexec" / "pyenv").write_text(f"#!/bin/sh\ntouch {asked}\necho {SCRIPT}\n")
    python = shim.with_name("python3")
    shutil.copy2(shim, python)
    argv = (str(python), "train.py")
    assert parse_program(argv) == Program(argv, is_train=False)
    assert not asked.exists()


@needs_script
def test_a_link_to_a_shim_runs_the_program_of_its_own_name(tmp_path, monkeypatch):
    """A shim runs ``pyenv exec`` of the name it is started by (``${0##*/}``), not its file's:
    a link ``dc`` to the ``distconv`` shim runs no distconv (``pyenv: dc: command not found``)
    and was read as this install's train; a link ``distconv`` to the ``python3`` shim runs
    this install's distconv and was read as a program of the user's."""
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    shim = fake_pyenv(tmp_path, f"echo {SCRIPT}")  # pyenv names a file for 'distconv' alone
    shutil.copy2(shim, shim.with_name("python3"))
    links = tmp_path / "bin"
    links.mkdir()
    (links / "dc").symlink_to(shim)
    (links / "distconv").symlink_to(shim.with_name("python3"))
    assert not parse_program([str(links / "dc"), *TRAIN]).is_train
    assert parse_program([str(links / "distconv"), *TRAIN]).is_train


def test_a_pyenv_that_hangs_is_waited_for_once_a_launch(tmp_path, monkeypatch):
    """A launch reads its first word more than once (the program, then whether it names one):
    a pyenv that hangs held it for the bound each time, twice the 2 s the docs name; one that
    took over the bound is not asked again."""
    import launcher.pyenv_shim

    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setattr(launcher.pyenv_shim, "WHICH_BOUND", 0.3)
    asked = tmp_path / "asked"
    shim = fake_pyenv(tmp_path, "")
    (tmp_path / "libexec" / "pyenv").write_text(f"#!/bin/sh\necho >> {asked}\nexec sleep 5\n")
    argv = [str(shim), *TRAIN]
    assert parse_program(argv) == Program(tuple(argv), is_train=False)
    assert names_a_program(argv)
    assert asked.read_text() == "\n"


def test_a_launch_whose_words_name_no_pyenv_shim_starts_no_process(tmp_path, monkeypatch):
    """Only a pyenv shim's ``distconv`` has a process asked (``/bin/sh``, pyenv's watchdog,
    then ``pyenv which``): reading any other first word after ``--`` (a name, a path, a ``.py``
    file, a file that is not there, a shell script, one named ``distconv``) starts none."""
    started = []

    def popen(*args, **kwargs):
        started.append(args[0] if args else kwargs.get("args"))
        return real_popen(*args, **kwargs)

    real_popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", popen)
    script, named = tmp_path / "run.sh", tmp_path / "bin" / "distconv"
    named.parent.mkdir()
    for file in (script, named, tmp_path / "train.py"):
        file.write_text("#!/bin/sh\n")
        file.chmod(0o755)
    words = ["distconv", "python3", shutil.which("python3"), str(tmp_path / "train.py")]
    words += ["./train.py", str(tmp_path / "missing"), str(script), str(named), str(SCRIPT)]
    for argv in [*([word, *TRAIN] for word in words), ["python3", "-m", "distconv", *TRAIN]]:
        names_a_program(argv)
        parse_program(argv, elsewhere=True)
    assert started == []
    names_a_program([str(fake_pyenv(tmp_path / "pyenv", "exit 1")), *TRAIN])  # a shim's: one
    assert [argv[0] for argv in started] == ["/bin/sh"]


def _pyenv_starting_a_sleep(tmp_path: Path, monkeypatch, sleep: str, then: str) -> Path:
    """A pyenv shim under ``tmp_path`` (``$PYENV_ROOT``) whose pyenv runs ``sleep`` (a
    ``sleep 300`` in the background), writes its pid to ``tmp_path / "started"``, then runs
    ``then``: the shim."""
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    shim = fake_pyenv(tmp_path, "")
    script = f"#!/bin/sh\n{sleep}\necho $! > {tmp_path / 'started'}\n{then}\n"
    (tmp_path / "libexec" / "pyenv").write_text(script)
    return shim


def _left_by(monkeypatch, shim: Path, started: Path) -> str | None:
    """What pyenv answers of ``shim`` (:func:`_pyenv_starting_a_sleep`), asked as a job of
    :mod:`tests.processes`, once its sleep ran and nothing of the job is left (it is killed at
    the end otherwise)."""
    import launcher.pyenv_shim

    with job_env(os.environ) as job:
        monkeypatch.setenv(MARK, job[MARK])  # what pyenv starts is the job
        answer = launcher.pyenv_shim.shim_target(str(shim))
        assert started.read_text().strip().isdigit()  # the child ran
        assert job_left(job, 2.0) == {}
    return answer


def test_a_pyenv_that_hangs_leaves_nothing_it_started_running(tmp_path, monkeypatch):
    """Past :data:`launcher.pyenv_shim.WHICH_BOUND` only pyenv's own process was killed: a
    process it had started (a hook's) ran on after the launch, holding its output pipe. pyenv
    runs in a process group of its own, killed whole."""
    import launcher.pyenv_shim

    monkeypatch.setattr(launcher.pyenv_shim, "WHICH_BOUND", 1.0)
    shim = _pyenv_starting_a_sleep(tmp_path, monkeypatch, "sleep 300 &", "wait")
    assert _left_by(monkeypatch, shim, tmp_path / "started") is None


def test_a_pyenv_that_answers_leaves_nothing_it_started_running(tmp_path, monkeypatch):
    """A process pyenv started and left running (a hook's, its output elsewhere) once it
    answered is killed with pyenv's group at the answer, as it is past the bound."""
    answer = f"echo {tmp_path / 'shims' / 'distconv'}"
    shim = _pyenv_starting_a_sleep(tmp_path, monkeypatch, "sleep 300 >/dev/null 2>&1 &", answer)
    assert _left_by(monkeypatch, shim, tmp_path / "started") == str(shim)


#: launches in one process, as a library caller makes them (``launcher.cli.main``): the
#: ``pyenv which`` asks after each, and its status
_LAUNCHES = """
import sys
import launcher.pyenv_shim
from launcher.cli import main

launcher.pyenv_shim.WHICH_BOUND = 0.3
shim, asked = sys.argv[1:]
for own, after in (([], ["--bogus"]), (["--bogus"], []), (["--bogus"], [])):
    try:
        status = main(["local", "--workers", "1", *own, "--", shim, "train", *after])
    except SystemExit as exc:
        status = exc.code
    print(status, len(open(asked).readlines()), flush=True)
"""


@needs_script
def test_pyenv_is_asked_once_a_launch_and_again_the_next(tmp_path):
    """A launch reads its first word more than once: only a pyenv past the bound was not
    asked again, so one that answered was asked twice a launch (twice as long where slow,
    the docs' 'once a launch' untrue), and one past the bound never again in that process:
    a library caller's next launch took the shim for a program of its own unasked. Each
    launch asks once."""
    asked, answer = tmp_path / "asked", tmp_path / "answer"
    shim = fake_pyenv(tmp_path, "")
    answering = f"[ -e {answer} ] && rm {answer} && echo {SCRIPT} && exit"
    (tmp_path / "libexec" / "pyenv").write_text(
        f"#!/bin/sh\necho >> {asked}\n{answering}\nexec sleep 5\n"
    )
    answer.touch()  # the first launch's pyenv answers; the next two hang
    argv = [sys.executable, "-c", _LAUNCHES, str(shim), str(asked)]
    done = run_job(argv, env=ENV, timeout=60, cwd=tmp_path)
    # train's refusal of --bogus (the shim is this install's), then the launcher's own
    assert done.stdout.split("\n")[:3] == ["2 1", "2 2", "2 3"], (done.stdout, done.stderr)
    assert "distconv train takes no --bogus" in done.stderr, done.stderr


#: ``distconv-launch ARGV`` (``python -m launcher``) after its first argument, its pyenv's
#: bound past any test's: only a stop ends its wait on a pyenv that hangs. A first argument
#: ``kept``: a Ctrl-C in its imports, kept for main
_HUNG_LAUNCH = """
import os, runpy, signal, sys
import launcher.pyenv_shim
from launcher import interrupt

launcher.pyenv_shim.WHICH_BOUND = 120.0
if sys.argv.pop(1) == "kept":
    interrupt.defer()
    os.kill(os.getpid(), signal.SIGINT)
runpy.run_module("launcher", run_name="__main__", alter_sys=True)
"""


def _hung_launch(
    tmp_path: Path, job: dict[str, str], *own: str, kept: bool = False
) -> subprocess.Popen:
    """A launcher (``local --workers 1 OWN -- SHIM train``) in a session of its own, in the
    job ``job``, once its pyenv, which hangs, has started a child (``sleep 300 &``, a hook's);
    each time pyenv is asked, a line in ``tmp_path/asked``. Where ``kept``, a stop kept from
    its imports, and at once: pyenv may be killed before it starts its child."""
    asked, started = tmp_path / "asked", tmp_path / "started"
    shim = fake_pyenv(tmp_path, "")
    (tmp_path / "libexec" / "pyenv").write_text(
        f"#!/bin/sh\necho >> {asked}\nsleep 300 &\n"
        f"echo $! > {started}.tmp && mv {started}.tmp {started}\nwait\n"
    )
    argv = ["local", "--workers", "1", *own, "--", str(shim), "train"]
    launcher = subprocess.Popen(
        [sys.executable, "-c", _HUNG_LAUNCH, "kept" if kept else "-", *argv], env=job,
        cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    if not kept:
        wait_while_running(started.exists, launcher, "pyenv's child", 10)
    return launcher


def test_a_launcher_killed_while_pyenv_hangs_leaves_nothing_pyenv_started(tmp_path):
    """A SIGKILL of the launcher's process group (``timeout -s KILL``, a batch system's
    killpg) while pyenv hangs: pyenv ran in a session of its own, which the kill did not
    reach, so pyenv and its hook's child ran on; a watchdog in pyenv's group kills it whole
    at the launcher's death, however it dies."""
    with job_env(ENV) as job:
        launcher = _hung_launch(tmp_path, job)
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.communicate(timeout=10)
        assert job_left(job, 3.0) == {}


def test_a_sigterm_to_a_launch_waiting_on_a_hung_pyenv_ends_it_and_what_pyenv_started(
    tmp_path,
):
    """A SIGTERM to the launcher (armed: run_local's reading of its program asks pyenv) ends
    the launch at once, 143, and nothing pyenv started outlives it. pyenv, stopped, was
    asked again by the launch's last line (whether the program writes JSON lines), which
    waited out its bound (2 s) or a second stop."""
    with job_env(ENV) as job:
        launcher = _hung_launch(tmp_path, job)
        launcher.send_signal(signal.SIGTERM)
        _, err = launcher.communicate(timeout=10)
        assert launcher.returncode == 143, err
        assert err.endswith("stopped by SIGTERM before the job started\n"), err
        assert job_left(job, 3.0) == {}


def test_a_ctrl_c_before_the_launcher_armed_ends_a_hung_pyenv_at_once(tmp_path):
    """A Ctrl-C (SIGINT to the launcher's process group, as a terminal sends it) while pyenv
    hangs before the launcher armed its handlers (a usage error's hint reads the program
    after ``--``): the launcher keeps it for its exit status, and pyenv, in a session of its
    own, no longer got it; the launch waited for pyenv's bound. The kept stop kills pyenv's
    group."""
    with job_env(ENV) as job:
        launcher = _hung_launch(tmp_path, job, "--bogus")
        os.killpg(launcher.pid, signal.SIGINT)
        _, err = launcher.communicate(timeout=10)
        assert launcher.returncode == 130, err
        assert job_left(job, 3.0) == {}


@pytest.mark.parametrize("own", [(), ("--bogus",)])
def test_a_stop_kept_before_pyenv_is_asked_ends_the_launch_at_once(tmp_path, own):
    """A Ctrl-C in the launcher's imports, kept, then pyenv asked: by a usage error's hint
    (``--bogus``, the launcher not armed) or by the last line of the launch that arm() ended
    on it. No signal came while pyenv ran, so nothing killed it: the launch waited out its
    bound (2 s) before its 130. A stop kept already kills pyenv's group once started."""
    with job_env(ENV) as job:
        launcher = _hung_launch(tmp_path, job, *own, kept=True)
        _, err = launcher.communicate(timeout=5)
        assert launcher.returncode == 130, err
        assert job_left(job, 3.0) == {}
