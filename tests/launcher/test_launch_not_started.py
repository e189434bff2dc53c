"""A worker's program that the kernel cannot start is named with why.

A script saved with Windows line ends (``#!/bin/sh\\r``), or whose ``#!`` interpreter is
missing, stopped the launch with ``[Errno 2] No such file or directory: './run.sh'``, of a file
that is there; a program without its execute bit with a bare ``[Errno 13]``.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from launcher.child import Child, ChildSpec
from launcher.commands import LaunchError, Program
from launcher.mpi import SCHEDULER_HOSTS, refuse_unstartable
from launcher.startable import local_problem, not_started, start_problem
from tests.launcher.launch_cli import launch
from tests.launcher.opened_files import opened


def _program(tmp_path: Path, text: bytes, mode: int = 0o755) -> Path:
    path = tmp_path / "run.sh"
    path.write_bytes(text)
    path.chmod(mode)
    return path


CANNOT_START = pytest.mark.parametrize(
    "text, mode, said",
    [
        (b"#!/bin/sh\r\necho hi\r\n", 0o755, "the interpreter its #! line names, $'/bin/sh\\r', "),
        (b"#! /no/such/sh -e\necho hi\n", 0o755, "its #! line names, '/no/such/sh', does not"),
        (b"#!/bin/sh\necho hi\n", 0o644, "run.sh' is not executable (chmod +x it)"),
    ],
)
#: an mpiexec that runs nothing (its flavor given): the command is printed, not run
NO_MPI = ("mpi", "-np", "2", "--mpiexec", "/bin/true", "--mpi-flavor", "mpich", "--dry-run")


#: how a launch names ./run.sh refused before anything starts, and refused at worker 0's start
BEFORE, AT_START = "'./run.sh'", "worker-0 ('./run.sh')"


def _refused_locally(tmp_path: Path, workers: str, said: str, named: str = AT_START) -> None:
    """``local --workers N -- ./run.sh`` stops naming the program (``named``) and ``said``;
    where it is refused before anything starts (``named`` :data:`BEFORE`), no run directory
    was made."""
    run_dir = tmp_path / "run"
    done = launch(
        "local", "--workers", workers, "--servers", "0", "--run-dir", str(run_dir),
        "--", "./run.sh",
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"distconv-launch local: error: cannot start {named}: "), last
    assert said in last, last
    assert "Traceback" not in done.stderr
    assert named == AT_START or not run_dir.exists(), done.stderr  # no job said, none started


@CANNOT_START
def test_a_program_that_cannot_start_is_refused_before_anything_starts(
    tmp_path: Path, text, mode, said
):
    """What the kernel would refuse of this host's program is said before the supervisor, the
    run directory (and with shards, the keys and the shards) start: it was said only at
    worker 0's start, as ``cannot start worker-0 ('./run.sh'): ...``."""
    _program(tmp_path, text, mode)
    _refused_locally(tmp_path, "2", said, named=BEFORE)


def test_a_program_on_path_is_looked_up_there(tmp_path: Path):
    program = _program(tmp_path, b"#!/bin/sh\r\n")
    why = not_started("run.sh", FileNotFoundError(2, "No such file or directory"), str(tmp_path))
    assert why == "the interpreter its #! line names, $'/bin/sh\\r', does not exist"
    assert program.exists()


def test_a_missing_program_keeps_the_systems_reason(tmp_path: Path):
    gone = str(tmp_path / "gone")
    assert not_started(gone, FileNotFoundError(2, "No such file or directory")) == (
        "no such file or directory"
    )


@CANNOT_START
def test_a_program_mpis_ranks_cannot_start_is_named_with_why(tmp_path: Path, text, mode, said):
    """Under mpi, Hydra's ranks said ``execvp error on file ./run.sh (No such file or
    directory)`` of the file there; refused before mpiexec runs, as under local."""
    _program(tmp_path, text, mode)
    _refused_in_the_ranks(tmp_path, said)


def test_a_script_whose_shebang_follows_a_byte_order_mark_is_refused_under_mpi(tmp_path: Path):
    """Refused under local (exec format error), it ran under mpi: execvp gives a script the
    kernel knows no format of to /bin/sh, which read the Python as shell ('import: not found',
    a syntax error) in every rank."""
    _program(tmp_path, b"\xef\xbb\xbf#!/usr/bin/env python3\nimport sys\n")
    _refused_in_the_ranks(tmp_path, "its #! line comes after a UTF-8 byte-order mark")


def _refused_in_the_ranks(tmp_path: Path, said: str) -> None:
    """``mpi`` refuses ./run.sh before printing its command, saying ``said``."""
    done = launch(*NO_MPI, "--", "./run.sh", cwd=tmp_path, timeout=60)
    assert done.returncode == 1, done.stdout
    last = done.stderr.splitlines()[-1]
    assert last.startswith("distconv-launch mpi: error: cannot start './run.sh' in the ranks: ")
    assert said in last, last
    assert done.stdout == ""


def test_ranks_on_other_hosts_have_their_own_program(tmp_path: Path):
    """Where other hosts are named, each runs its own copy: this host's is not judged. Hosts
    that are all this one (``-H localhost:2``) run this host's, which is."""
    _program(tmp_path, b"#!/bin/sh\r\n")
    done = launch(*NO_MPI, "-H", "a:1,b:1", "--", "./run.sh", cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith(" ./run.sh")
    here = launch(*NO_MPI, "-H", "localhost:2", "--", "./run.sh", cwd=tmp_path, timeout=60)
    assert (here.returncode, here.stdout) == (1, ""), here.stderr
    assert "cannot start './run.sh' in the ranks: " in here.stderr


def test_an_mpiexec_that_cannot_start_is_named_with_why(tmp_path: Path):
    """A wrapper script as --mpiexec saved with Windows line ends: its ``--version`` run said
    ``[Errno 2] No such file or directory: './mpiexec.sh'``."""
    wrapper = tmp_path / "mpiexec.sh"
    wrapper.write_bytes(b'#!/bin/sh\r\nexec mpiexec "$@"\r\n')
    wrapper.chmod(0o755)
    done = launch(
        "mpi", "-np", "1", "--mpiexec", "./mpiexec.sh", "--dry-run", "--", "--epochs", "1",
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "distconv-launch mpi: error: cannot run './mpiexec.sh' --version: the interpreter its "
        "#! line names, $'/bin/sh\\r', does not exist"
    )


def test_an_interpreter_the_kernel_knows_no_format_of_is_named_not_the_script(tmp_path: Path):
    """A script whose #! line names a wrapper script without one of its own: the kernel's
    'exec format error' is the wrapper's, and the launch said of ./run.sh, first line
    '#!.../wrap.sh', that it has no #! line."""
    wrapper = tmp_path / "wrap.sh"
    wrapper.write_bytes(b'echo wrapped "$@"\n')
    wrapper.chmod(0o755)
    _program(tmp_path, b"#!" + bytes(wrapper) + b"\necho hi\n")
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(tmp_path / "run"), "--",
        "./run.sh",
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"distconv-launch local: error: cannot start worker-0 ('./run.sh'): the interpreter its "
        f"#! line names, {str(wrapper)!r}, cannot be run: it has no #! line naming its "
        "interpreter: make its first line '#!/bin/sh' (or another)"
    )


@pytest.mark.parametrize(
    "text, said, named",
    [
        (
            b"\xef\xbb\xbf#!/bin/sh\necho hi\n",
            "its #! line comes after a UTF-8 byte-order mark",
            BEFORE,
        ),
        (  # refused before the job: start_problem leaves it to the kernel, as
            # execvp (mpi) runs it with sh, but a local worker's subprocess has no such fallback
            b"echo hi\n",
            "it has no #! line naming its interpreter: name the interpreter first after --, "
            "-- sh ./run.sh, or make its first line '#!/bin/sh'",
            BEFORE,
        ),
    ],
)
def test_a_script_the_kernel_knows_no_format_of_is_named_with_why(
    tmp_path: Path, text, said, named
):
    """A script without a ``#!`` line, or with one behind a Windows editor's byte-order mark
    (invisible in an editor), stopped the launch with a bare ``exec format error``."""
    _program(tmp_path, text)
    _refused_locally(tmp_path, "1", said, named)


@pytest.mark.parametrize("variable", SCHEDULER_HOSTS)
def test_ranks_a_batch_system_places_have_their_own_program(tmp_path: Path, variable):
    """Under Slurm, PBS, LSF or SGE, mpiexec takes its hosts from the allocation, with no -H:
    a program whose #! interpreter exists only on the compute nodes was refused on the login
    node, though the ranks would run it; without such a variable it
    is refused as before."""
    program = Program((str(_program(tmp_path, b"#!/opt/on-the-nodes/python\n")),), False)
    refuse_unstartable(program, (), {variable: "node[1-2]"})
    with pytest.raises(LaunchError, match="cannot start"):
        refuse_unstartable(program, (), {variable: ""})


def _batch_list(tmp_path: Path, variable: str, hosts: list[str]) -> str:
    """``variable``'s value naming ``hosts``, two slots each, as its batch system writes it."""
    lines = {
        "PBS_NODEFILE": "".join(f"{host}\n{host}\n" for host in hosts),  # a line per slot
        "COBALT_NODEFILE": "".join(f"{host}\n" for host in hosts),  # a line per host
        "PE_HOSTFILE": "".join(f"{host} 2 all.q@{host} UNDEFINED\n" for host in hosts),
    }
    if variable in lines:  # a file
        nodes = tmp_path / "nodes"
        nodes.write_text(lines[variable])
        return str(nodes)
    if variable == "LSB_MCPU_HOSTS":
        return " ".join(f"{host} 2" for host in hosts)
    return " ".join(f"{host} {host}" for host in hosts)  # LSB_HOSTS: a host a slot


@pytest.mark.parametrize(
    "variable",
    ["PBS_NODEFILE", "LSB_HOSTS", "LSB_MCPU_HOSTS", "PE_HOSTFILE", "COBALT_NODEFILE"],
)
def test_a_pbs_lsf_sge_or_cobalt_allocation_of_this_host_alone_runs_here(tmp_path: Path, variable):
    """A PBS or LSF host list naming this host alone counted as other hosts, where Slurm's
    and ``-H localhost:2`` run here: a program the ranks cannot start was let through (a
    missing one only noted). Each is read and its hosts judged by
    :func:`launcher.this_host.is_this_host`; another host in it is elsewhere. SGE's
    ``PE_HOSTFILE`` and Cobalt's ``COBALT_NODEFILE`` are read alike."""
    import socket

    program = Program((str(_program(tmp_path, b"#!/opt/on-the-nodes/python\n")),), False)
    for here in (["localhost"], [socket.gethostname(), "127.0.0.1"]):
        with pytest.raises(LaunchError, match="cannot start"):
            refuse_unstartable(program, (), {variable: _batch_list(tmp_path, variable, here)})
    refuse_unstartable(
        program, (), {variable: _batch_list(tmp_path, variable, ["localhost", "n1"])}
    )


def test_an_sge_hostfile_not_written_as_sge_writes_it_counts_as_other_hosts(tmp_path: Path):
    """A ``PE_HOSTFILE`` line without its slot count after the host is not read as one host
    a line: its hosts are unknown, so the ranks may run elsewhere."""
    from launcher.batch_hosts import scheduler_hosts_here

    nodes = tmp_path / "pe_hostfile"
    nodes.write_text("localhost 2 all.q@localhost UNDEFINED\n")
    assert scheduler_hosts_here("PE_HOSTFILE", str(nodes))
    nodes.write_text("localhost\nlocalhost all.q\n")
    assert not scheduler_hosts_here("PE_HOSTFILE", str(nodes))


def test_a_program_the_ranks_cannot_start_is_quoted_as_local_quotes_it(tmp_path: Path):
    """Its path unquoted, a line break in it split the one-line refusal in two, which only mpi's
    said so: local's, and every other launcher line, quote it
    (:func:`launcher.shown.shown`)."""
    path = tmp_path / "run\nme.sh"
    path.write_bytes(b"#!/bin/sh\n")
    path.chmod(0o644)
    with pytest.raises(LaunchError) as refused:
        refuse_unstartable(Program((str(path),), False), (), {})
    said = str(refused.value)
    assert said.startswith(f"cannot start $'{tmp_path}/run\\nme.sh' in the ranks: "), said
    assert "\n" not in said, said


def test_a_worker_that_cannot_start_is_named_with_its_program_quoted(tmp_path: Path):
    """``cannot start worker-0 (PATH): ...``, said at the start of a script that the kernel
    refuses only then (no ``#!`` line), showed PATH unquoted: a line break in it split the
    one-line refusal in two, as mpi's did; quoted as the launcher's other lines are."""
    path = tmp_path / "run\nme.sh"
    path.write_bytes(b"echo hi\n")
    path.chmod(0o755)
    with open(tmp_path / "out", "wb") as out, pytest.raises(LaunchError) as refused:
        Child(ChildSpec("worker", 0, [str(path)]), tmp_path / "w.log", out, threading.Lock())
    said = str(refused.value)
    assert said.startswith(f"cannot start worker-0 ($'{tmp_path}/run\\nme.sh'): it has no #!"), said
    assert "\n" not in said, said


@pytest.mark.parametrize(
    "ask",
    [
        lambda path: start_problem(str(path)),
        lambda path: not_started(str(path), OSError(errno.ENOEXEC, "Exec format error")),
    ],
    ids=["start_problem", "not_started"],
)
def test_a_scripts_first_line_is_read_once(tmp_path: Path, ask):
    """Each check read the line again (the BOM, then the #! interpreter): two answers could be
    about two versions of a file being written."""
    path = _program(tmp_path, b"#!/no/such/shell\necho hi\n")
    with opened() as paths:
        assert ask(path) is not None
    assert paths.count(str(path)) == 1, paths


@pytest.mark.timeout(60)
def test_a_script_without_a_shebang_is_refused_before_any_worker_with_how_to_run_it(
    tmp_path: Path,
):
    """A Python script with no ``#!`` line and no ``.py`` name, executable: refused at worker
    0's start, after the run directory was made and other workers may have started.
    Now refused before anything starts, one line naming it and how to run it, and the way it
    names runs it."""
    job = tmp_path / "job"
    job.write_text("import os\nprint('rank', os.environ['RANK'], 'ran')\n")
    job.chmod(0o755)
    run_dir = tmp_path / "run"
    local = ("local", "--workers", "2", "--servers", "0", "--run-dir", str(run_dir), "--")
    done = launch(*local, "./job", "--x", cwd=tmp_path, timeout=50)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    told = "name the interpreter first after --, -- python3 ./job --x or -- sh ./job --x, or"
    assert done.stderr == (
        f"distconv-launch local: error: cannot start {BEFORE.replace('run.sh', 'job')}: it has "
        f"no #! line naming its interpreter: {told} make its first line '#!/bin/sh' (or another)\n"
    )
    assert not run_dir.exists()  # no job said, nothing made or started
    done = launch(*local, "python3", "./job", "--x", cwd=tmp_path, timeout=50)
    assert done.returncode == 0, done.stderr
    assert "[worker 0] rank 0 ran" in done.stdout and "[worker 1] rank 1 ran" in done.stdout


@pytest.mark.parametrize(
    "link, target, way",
    [("run", "steps.sh", "sh"), ("go.sh", "job.rb", "ruby"), ("job", "job.py", "python3")],
    ids=["shell", "ruby-named-sh", "python"],
)
def test_a_linked_script_without_a_shebang_is_named_its_targets_interpreter(
    tmp_path: Path, link, target, way
):
    """A link to a script with no ``#!`` line was told the interpreter its own name suggests
    (``run`` -> ``steps.sh``: python3 or sh; ``go.sh`` -> ``job.rb``: sh), not its target's.
    """
    (tmp_path / target).write_text("echo hi\n")
    (tmp_path / target).chmod(0o755)
    (tmp_path / link).symlink_to(target)
    said = local_problem(Program((str(tmp_path / link),), is_train=False))
    assert f"first after --, -- {way} {tmp_path / link}, or make" in str(said), said


def test_a_file_that_is_a_program_is_asked_by_a_name_of_its_own(tmp_path: Path):
    """:mod:`launcher.startable` asked of a file and :mod:`launcher.train_words` of a word
    after ``--`` under one name, ``reads_as_program``: the file's question is
    :func:`launcher.startable.is_program_file`. A script without its execute bit (a
    copy elsewhere may have it) is a program; a data file beside the launch is not."""
    import launcher.startable as startable

    script = _program(tmp_path, b"#!/bin/sh\n", 0o644)
    data = tmp_path / "set.npz"
    data.write_bytes(b"PK\x03\x04")
    assert startable.is_program_file(str(script))
    assert not startable.is_program_file(str(data))
    assert not hasattr(startable, "reads_as_program")
