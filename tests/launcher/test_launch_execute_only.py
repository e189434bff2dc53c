"""An execute-only program (mode 0111, an administrator's binary) is left to the kernel, which
runs it: exec needs no read. The up-front check of a ``#!`` line read its first line as
empty, and refused it as a script with none, though it starts.

Asked as a user who cannot read it: root reads every file, so, run as root, the check is made
by ``nobody`` (in a forked child, this process's modules already loaded: ``nobody`` may not
read this Python's own files), in a folder that ``nobody`` may enter."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from launcher.commands import Program
from launcher.startable import local_problem

NOBODY = 65534


def _asked_as(user: int | None, program: Path) -> str:
    """:func:`local_problem`'s answer of ``program``, asked as ``user`` (None: as this one)."""
    if user is None:
        return str(local_problem(Program((str(program),), is_train=False)))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no return into pytest's frames
        try:
            os.close(read)
            os.setgid(user)
            os.setuid(user)
            said = str(local_problem(Program((str(program),), is_train=False)))
            os.write(write, said.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        said = answer.read().decode()
    os.waitpid(pid, 0)
    return said


@pytest.mark.timeout(60)
def test_an_execute_only_binary_is_not_refused_as_a_script_without_a_shebang(tmp_path):
    root = os.geteuid() == 0
    where = Path(tempfile.mkdtemp(prefix="execute-only-")) if root else tmp_path
    user = NOBODY if root else None
    try:
        where.chmod(0o711)
        program = where / "runs-unread"
        shutil.copyfile(shutil.which("true"), program)
        program.chmod(0o111)
        assert subprocess.run([str(program)], user=user, timeout=30).returncode == 0  # it runs
        assert _asked_as(user, program) == "None"
    finally:
        if root:
            shutil.rmtree(where)
