"""Bash's ``exec -c NAME`` looks NAME up on the shell's own PATH before it empties the
environment, so in the images (ENV PATH holds /opt/venv/bin) it always found distconv; only
``env -i NAME``, which leaves the lookup to execvp with no PATH, searches the default path. The
Dockerfiles' comment on the /usr/bin links (c4965ad) said both did; a guard for the corrected
premise, on real processes (review k271)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("bash") is None, reason="no bash"),
]


def test_exec_c_finds_a_program_on_the_shells_path_and_env_i_does_not(tmp_path):
    program = tmp_path / "distconv-k271-probe"
    # not /bin/sh: dash sets a PATH of its own where none is given
    program.write_text(
        f"#!{sys.executable}\nimport os\nprint('found, PATH', os.environ.get('PATH', 'unset'))\n"
    )
    program.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    run = {"env": env, "capture_output": True, "text": True, "timeout": 30}
    cleared = subprocess.run(["bash", "-c", f"exec -c {program.name}"], **run)
    # found, and run with no PATH at all
    assert (cleared.returncode, cleared.stdout) == (0, "found, PATH unset\n"), cleared.stderr
    emptied = subprocess.run(["bash", "-c", f"exec env -i {program.name}"], **run)
    assert emptied.returncode == 127 and program.name in emptied.stderr
