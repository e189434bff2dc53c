"""A login shell in the CPU image (``bash -lc "distconv train ..."``, ``sh -l -c``, which the
manifest checks read as a rank) reads Debian's /etc/profile, which sets PATH anew and drops the
image's /opt/venv/bin: distconv was not found (exit 127) and ``python`` was the system one.
The image now installs docker/profile.sh as /etc/profile.d/distconv.sh, which /etc/profile
reads after it. This machine runs the image's Debian (bookworm, the same /etc/profile); the
image itself cannot be built here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

DOCKER = Path(__file__).resolve().parents[2] / "docker"
VENV = "/opt/venv/bin"

pytestmark = pytest.mark.timeout(60)


def _runtime_stage() -> str:
    """The CPU Dockerfile's last stage, the image that runs."""
    return (DOCKER / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]


def _login_path(profile_d: str | None) -> list[str]:
    """PATH as a login shell of the image sees it: the image's PATH, then /etc/profile, then
    the file the image puts in /etc/profile.d (``profile_d``, a path here)."""
    script = '. /etc/profile; [ -z "$1" ] || . "$1"; printf %s "$PATH"'
    env = {"PATH": f"{VENV}:/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent"}
    argv = ["sh", "-c", script, "sh", profile_d or ""]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=True)
    return out.stdout.split(":")


def test_the_image_installs_the_profile_script():
    copies = re.findall(r"^COPY\s+(\S+)\s+/etc/profile\.d/(\S+)$", _runtime_stage(), flags=re.M)
    assert copies == [("docker/profile.sh", "distconv.sh")]
    env_path = re.search(r"^ENV PATH=(\S+)", _runtime_stage(), flags=re.M)
    assert env_path is not None and env_path.group(1).split(":")[0] == VENV


def test_a_login_shell_finds_the_venv_first():
    if not Path("/etc/profile").exists() or VENV in _login_path(None):
        pytest.skip("this machine's /etc/profile keeps PATH: not the image's Debian")
    assert _login_path(str(DOCKER / "profile.sh"))[0] == VENV


def test_the_profile_script_runs_under_dash_and_bash():
    for shell in ("sh", "bash"):
        script = f'. "{DOCKER / "profile.sh"}"; printf %s "$PATH"'
        out = subprocess.run(
            [shell, "-c", script],
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0 and out.stdout == f"{VENV}:/usr/bin:/bin", out.stderr
