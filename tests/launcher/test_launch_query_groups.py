"""The launcher's queries before a job, ``mpiexec --version`` and ``distconv keys``: past their
bound, or on a stop signal, what they started goes with them. Only the query's own process was
killed: a wrapper's ``mpiexec`` (or a grandchild of a hung one) ran on after the launcher, in
its process group, holding the query's output pipe."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from launcher.commands import LaunchError
from launcher.shown import shown
from tests.launcher.launch_cli import ENV, launcher_command, wait_while_running
from tests.launcher.opened_files import opened
from tests.processes import MARK, job_env, job_left


def _hung_query(tmp_path: Path) -> Path:
    """A stand-in query under ``tmp_path`` that starts a grandchild (``sleep 300`` in the
    background, its pid written to ``tmp_path / "started"``) and waits for it: a hung
    ``mpiexec --version`` whose wrapper started the real one."""
    query = tmp_path / "mpiexec"
    started = tmp_path / "started"
    # the pid written whole before the file is there (mv): the test reads it once it is
    query.write_text(
        f'#!/bin/sh\nsleep 300 &\necho $! > "{started}.tmp"\nmv "{started}.tmp" "{started}"\nwait\n'
    )
    query.chmod(0o755)
    return query


def _nothing_left(monkeypatch, tmp_path: Path, ask) -> str:
    """What ``ask()`` refuses (a LaunchError's text), run as a job of :mod:`tests.processes`
    once its stand-in's grandchild ran, and that nothing of the job is left after it."""
    with job_env(os.environ) as job:
        monkeypatch.setenv(MARK, job[MARK])  # what the query starts is the job
        with pytest.raises(LaunchError) as refused:
            ask()
        assert (tmp_path / "started").read_text().strip().isdigit()  # the grandchild ran
        assert job_left(job, 2.0) == {}
    return str(refused.value)


def test_an_mpiexec_past_its_bound_leaves_nothing_it_started_running(tmp_path, monkeypatch):
    from launcher import mpi

    monkeypatch.setattr(mpi, "VERSION_BOUND", 1.0)
    query = _hung_query(tmp_path)
    said = _nothing_left(monkeypatch, tmp_path, lambda: mpi.detect_flavor(str(query)))
    assert (
        said == f"cannot run {shown(query)} --version: no answer in 1 s (killed); pass --mpi-flavor"
    )


def test_distconv_keys_past_its_bound_leaves_nothing_it_started_running(tmp_path, monkeypatch):
    """A hung key generation held the launch for ever: it has a bound, named in the error."""
    from launcher import job_keys

    monkeypatch.setattr(job_keys, "KEYS_BOUND", 1.0)
    query = _hung_query(tmp_path)
    monkeypatch.setattr(job_keys, "keys_command", lambda keys_dir, workers: [str(query)])
    said = _nothing_left(monkeypatch, tmp_path, lambda: job_keys.make_keys(tmp_path / "keys", 2))
    assert said == "`distconv keys` made no CURVE keys in 1 s (killed); the job did not start"


@pytest.mark.timeout(60)
def test_a_ctrl_c_while_mpiexec_is_asked_leaves_nothing_it_started_running(tmp_path):
    """A terminal's Ctrl-C (SIGINT to the launcher's process group) while ``mpiexec --version``
    hangs: the query, in a session of its own, no longer gets it; the launcher kills its
    group, the grandchild too, and says so."""
    query = _hung_query(tmp_path)
    argv = ["mpi", "-np", "1", "--mpiexec", str(query), "--run-dir", str(tmp_path / "run")]
    with job_env(ENV) as env:  # a hung launcher goes with what it started
        launcher = subprocess.Popen(
            [*launcher_command(), *argv, "--", "--epochs", "1"], env=env, cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # a terminal's foreground group of its own
        )  # fmt: skip
        try:
            wait_while_running((tmp_path / "started").exists, launcher, "the grandchild")
            os.killpg(launcher.pid, signal.SIGINT)
            _, stderr = launcher.communicate(timeout=30)
        finally:
            launcher.kill()
            launcher.wait()
        assert stderr.strip() == "distconv-launch mpi: interrupted before the job started"
        assert launcher.returncode == 128 + signal.SIGINT
        assert job_left(env, 2.0) == {}


@pytest.mark.parametrize("first", [b"", b"#!{wrap}\n"], ids=["no #!", "#! of a script with none"])
def test_an_mpiexec_the_kernel_cannot_exec_is_refused_not_run_as_shell_code(tmp_path, first):
    """Started through the watchdog's shell, an ``--mpiexec`` the kernel knows no format of
    (ENOEXEC: no ``#!`` line, or one naming a script without one) was run by the shell's
    ``exec`` as shell code, its output read as the MPI's version: ``unknown MPI: `mpiexec
    --version` says 'Open MPI'`` for a script that is no MPI; it was refused, and is again,
    before anything runs. Each file's first line is read once: the reason read them
    again, of what may be another version of the file than the one judged."""
    from launcher import mpi

    wrap, ran = tmp_path / "wrap", tmp_path / "ran"
    wrap.write_bytes(f'touch "{ran}"\necho "mpiexec (Open MPI) 4.1.0"\n'.encode())
    query = tmp_path / "mpiexec"
    query.write_bytes(first.replace(b"{wrap}", bytes(wrap)) + wrap.read_bytes())
    for path in (wrap, query):
        path.chmod(0o755)
    with opened() as paths, pytest.raises(LaunchError) as refused:
        mpi.detect_flavor(str(query))
    assert str(refused.value).startswith(f"cannot run {shown(query)} --version: ")
    assert "it has no #! line naming its interpreter" in str(refused.value)
    assert not ran.exists()
    assert paths.count(str(query)) == 1 and paths.count(str(wrap)) <= 1, paths


@pytest.mark.parametrize(
    "machine", [b"\xef\xbe", b"\x0a\x00"], ids=["0xbeef", "EM_MIPS_RS3_LE, a newline byte"]
)
def test_an_mpiexec_binary_for_another_machine_is_named_so(tmp_path, machine):
    """An ELF ``--mpiexec`` the kernel refuses (ENOEXEC: built for another machine) ends with
    the watchdog's shell's 126, whose line (``/bin/sh: 1: exec: …: Exec format error``) was
    the reason given; it is the one a child's start gives (:func:`startable.not_started`).
    Its e_machine is read whole, a 0x0a byte in it too."""
    from launcher import mpi, startable

    query = tmp_path / "mpiexec"
    elf = bytearray(Path(shutil.which("true")).read_bytes())
    elf[18:20] = machine  # e_machine: one no kernel (nor binfmt_misc) runs here
    query.write_bytes(elf)
    query.chmod(0o755)
    with pytest.raises(OSError) as kernel:  # the kernel's ENOEXEC, as a child's start gets it
        subprocess.run([query], check=False)
    with pytest.raises(LaunchError) as refused:
        mpi.detect_flavor(str(query))
    why = startable.not_started(str(query), kernel.value)
    assert str(refused.value) == f"cannot run {shown(query)} --version: {why}"
    assert "binary for another machine" in why


def test_a_native_mpiexec_refused_for_another_reason_keeps_the_shells_line(tmp_path):
    """The watchdog's shell ends with 126 for every error of its ``exec`` but a missing file:
    a native ``mpiexec`` still open for writing (ETXTBSY: being copied or built) was named
    "a binary for another machine". Its e_machine is this host's: the shell's line, the
    kernel's true reason, is kept. The file is read once, before the query: it was
    read again twice after the shell's 126, which could describe another version of it."""
    from launcher import mpi

    query = tmp_path / "mpiexec"
    shutil.copyfile(shutil.which("true"), query)
    query.chmod(0o755)
    with open(query, "r+b"), opened() as paths:  # held open for writing
        with pytest.raises(LaunchError) as refused:
            mpi.detect_flavor(str(query))
    said = str(refused.value)
    assert said.startswith(f"cannot run {shown(query)} --version: "), said
    assert said.endswith(os.strerror(errno.ETXTBSY)), said
    assert paths.count(str(query)) == 1, paths
