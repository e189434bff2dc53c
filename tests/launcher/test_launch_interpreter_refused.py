"""A script whose ``#!`` interpreter the kernel cannot run, whatever is in it: one without its
execute bit, a folder, or one whose own interpreter is missing. Each is named with why, as
the kernel's refusal of the script's start (``Permission denied``, ``No such file``) does
not say, alike wherever it is judged: before mpi's ranks start it
(:func:`launcher.startable.start_problem`), before ``mpiexec --version`` runs
(:func:`launcher.mpi.detect_flavor`), and at a child's start
(:func:`launcher.startable.not_started`, of the kernel's own error)."""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path

import pytest

from launcher.commands import LaunchError
from launcher.shown import shown
from launcher.startable import not_started, start_problem


def _interpreter(tmp_path: Path, case: str) -> tuple[Path, str]:
    """The interpreter of ``case`` under ``tmp_path``, and what it is said to be."""
    interpreter = tmp_path / "interpreter"
    if case == "a folder":
        interpreter.mkdir()
        return interpreter, "is a folder, not a program"
    if case == "not executable":  # nor a #! line: it was told to add one, which fixes nothing
        interpreter.write_text("echo hi\n")
        interpreter.chmod(0o644)
        return interpreter, "is not executable (chmod +x it)"
    interpreter.write_text("#!/no/such/shell\n")  # its own interpreter missing
    interpreter.chmod(0o755)
    missing = "the interpreter its #! line names, '/no/such/shell', does not exist"
    return interpreter, f"cannot be run: {missing}"


@pytest.mark.parametrize(
    "case, kernel",
    [
        ("not executable", errno.EACCES),
        ("a folder", errno.EACCES),
        ("missing a level down", errno.ENOENT),
    ],
)
def test_an_interpreter_the_kernel_cannot_run_is_named_with_why(tmp_path: Path, case, kernel):
    """An interpreter without its execute bit was said to have no ``#!`` line (add one), a
    folder not to exist, and a second level's missing interpreter was not found (the shell's
    'not found' of the script, or the first level's "does not exist")."""
    from launcher import mpi

    interpreter, what = _interpreter(tmp_path, case)
    script = tmp_path / "mpiexec"
    script.write_text(f"#!{interpreter}\necho 'mpiexec (Open MPI) 4.1.0'\n")
    script.chmod(0o755)
    said = f"the interpreter its #! line names, {shown(interpreter)}, {what}"
    with pytest.raises(OSError) as started:  # the kernel's own refusal
        subprocess.run([script], check=False)
    assert started.value.errno == kernel
    assert not_started(str(script), started.value) == said
    assert start_problem(str(script)) == said
    with pytest.raises(LaunchError) as refused:
        mpi.detect_flavor(str(script))
    assert str(refused.value) == f"cannot run {shown(script)} --version: {said}"
