"""``distconv-launch``'s own error lines show a value the user gave with a line break or
another character that does not print as a shell's ``$'...'`` word, as ``distconv train``'s do
(:func:`distconv.messages.quote_in_errors`): squeezed onto one line, ``--hostfile
$'no\\nfile'`` read ``--hostfile no file``, another path."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from launcher.child import WRAPUP_SECONDS
from launcher.child_spec import ChildSpec
from launcher.commands import LaunchError, parse_program
from launcher.mpi import find_mpiexec, parse_hosts
from launcher.options import job_name
from launcher.wrapup import overdue_said
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import run_to_exit


@pytest.mark.timeout(60)
def test_an_unprintable_value_in_the_launcher_s_error_is_shell_quoted(tmp_path: Path):
    argv = ["mpi", "-np", "2", "--mpi-flavor", "mpich", "--hostfile", "no\nfile"]
    done = launch(*argv, "--", "--epochs", "1", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        "distconv-launch mpi: error: --hostfile $'no\\nfile': cannot read it: no such file or "
        "directory\n"
    )


@pytest.mark.timeout(60)
def test_a_script_name_in_the_launcher_s_error_is_shell_quoted_not_repr(tmp_path: Path):
    """The launcher's own messages quoted the program's name with ``repr()``:
    ``script 'no\\nfile.py'``, which a shell pastes back as another name (``no\\nfile.py``,
    a backslash and an n), not the ``$'...'`` word its other lines use."""
    done = launch("local", "--workers", "1", "--", "no\nfile.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr == "distconv-launch local: error: script $'no\\nfile.py' does not exist\n"


@pytest.mark.parametrize(
    "refused, said",
    [
        (lambda: find_mpiexec("/no\tmpi"), "--mpiexec $'/no\\tmpi' is not an executable"),
        (lambda: parse_hosts("a:b\nc"), "-H $'a:b\\nc': slots must be a positive integer, got "),
        (lambda: parse_program(["it's.py"]), "script $'it\\'s.py' does not exist"),
        (lambda: job_name("a\nb"), "'-', '_' or '.': $'a\\nb'"),
    ],
    ids=["mpiexec", "hosts", "script", "job id"],
)
def test_each_value_the_launcher_names_is_quoted_as_the_shell_does(refused, said):
    """Where its messages name an mpiexec, a host list, a script or a job id, a value with a
    character that does not print, or a quote, is the shell's ``$'...'`` word."""
    with pytest.raises((LaunchError, argparse.ArgumentTypeError)) as raised:
        refused()
    assert said in str(raised.value)


@pytest.mark.timeout(30)
def test_the_line_an_overdue_child_reported_its_end_by_is_quoted_as_the_shell_does(tmp_path):
    """The wrap-up's message quoted that line with ``repr()``, the launcher's last (the fix that
    quoted the others left it, as child.py was full): a quote in it came out in double quotes, a
    tab as ``\\t``."""
    child = run_to_exit(tmp_path, ChildSpec("mpiexec", 0, ["printf", "last\\n"]))
    said = overdue_said(child, "it's\tdone\n")
    assert said.startswith(
        f"mpiexec 0 did not exit {WRAPUP_SECONDS:g} s after it reported the job's end "
        "($'it\\'s\\tdone'); stopping it (SIGTERM, then SIGKILL at the grace's end); its last "
        "lines: last"
    ), said
