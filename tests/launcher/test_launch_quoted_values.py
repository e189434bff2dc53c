"""``distconv-launch``'s own error lines show a value the user gave with a line break or
another character that does not print as a shell's ``$'...'`` word, as ``distconv train``'s do
(:func:`distconv.messages.quote_in_errors`) (k468): squeezed onto one line, ``--hostfile
$'no\\nfile'`` read ``--hostfile no file``, another path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch


@pytest.mark.timeout(60)
def test_an_unprintable_value_in_the_launcher_s_error_is_shell_quoted(tmp_path: Path):
    argv = ["mpi", "-np", "2", "--mpi-flavor", "mpich", "--hostfile", "no\nfile"]
    done = launch(*argv, "--", "--epochs", "1", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        "distconv-launch mpi: error: --hostfile $'no\\nfile': cannot read it: no such file or "
        "directory\n"
    )
