"""A rank started as ``env -i distconv train ...`` (or ``exec -c``) has no PATH: env execs the
bare name with execvp, which then searches the C library's default path only (``/bin:/usr/bin``,
``confstr(_CS_PATH)``), never the image's ``/opt/venv/bin`` nor ``/usr/local/bin``. The images
had distconv in the venv only, so such a rank exited 127 though the manifest checks pass it
(they read ``distconv`` by its last word). Each image now links its console scripts into
``/usr/bin``; these read the Dockerfiles, as no Docker engine is here.

Bash's ``exec -c NAME`` differs: it looks NAME up on the shell's own PATH before it empties the
environment, so in the images (ENV PATH holds /opt/venv/bin) it always finds distconv; only
``env -i NAME`` leaves the lookup to execvp with no PATH. Both premises are checked on real
processes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.test_docker import DOCKERFILES

ROOT = Path(__file__).resolve().parents[2]
VENV = "/opt/venv/bin"

pytestmark = pytest.mark.timeout(60)


def _scripts() -> list[str]:
    """The console scripts pip installs into the venv's bin (pyproject's [project.scripts])."""
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    return sorted(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"])


def _default_path() -> list[str]:
    """Where execvp looks for a bare name when PATH is unset."""
    return os.confstr("CS_PATH").split(":")


def _links_as_root(dockerfile: Path) -> dict[str, str]:
    """``{link: target}`` for each ``RUN ln -s TARGET... DIR/`` of the runtime stage made before
    its last ``USER`` (the non-root user could not write /usr/bin)."""
    stage = dockerfile.read_text().rsplit("\nFROM ", 1)[1]
    as_root = stage.rsplit("\nUSER ", 1)[0]
    links = {}
    for line in re.findall(r"^RUN ln -s (.+)$", as_root, flags=re.M):
        *targets, folder = shlex.split(line)
        for target in targets:
            links[f"{folder.rstrip('/')}/{target.rsplit('/', 1)[1]}"] = target
    return links


def test_execvp_without_path_searches_the_default_path_only(tmp_path):
    """The premise, on real processes: a program in a folder outside the default path (as
    /opt/venv/bin and /usr/local/bin are) is found with PATH set, and not after ``env -i``."""
    program = tmp_path / "distconv-path-probe"
    program.write_text("#!/bin/sh\necho found\n")
    program.chmod(0o755)
    assert str(tmp_path) not in _default_path() and "/usr/local/bin" not in _default_path()
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    kept = subprocess.run([program.name], env=env, capture_output=True, text=True, timeout=30)
    assert kept.stdout == "found\n"
    emptied = subprocess.run(
        ["env", "-i", program.name], env=env, capture_output=True, text=True, timeout=30
    )
    assert emptied.returncode == 127 and program.name in emptied.stderr


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_every_console_script_is_on_the_default_path_of_the_image(path):
    links = _links_as_root(path)
    for name in _scripts():
        found = [f"{d}/{name}" for d in _default_path() if f"{d}/{name}" in links]
        assert found, f"{path.name}: no {name} in {_default_path()} ({links})"
        assert links[found[0]] == f"{VENV}/{name}"


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_exec_c_finds_a_program_on_the_shells_path_and_env_i_does_not(tmp_path):
    program = tmp_path / "distconv-exec-c-probe"
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
