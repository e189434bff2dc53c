"""A stdout that cannot take ``mpi --dry-run``'s command or ``k8s``'s manifests (a full disk, a
reader that is gone) is the launcher's one error line, exit 1.

Only a closed stdout (``>&-``) was refused: otherwise the text sat in Python's buffer and its
flush at exit failed with ``Exception ignored in: <_io.TextIOWrapper name='<stdout>'>``, a
second line ``OSError: [Errno 28] No space left on device``, and exit 120 (under
``PYTHONUNBUFFERED``, ``error: [Errno 28] ...`` naming neither stdout nor what was lost).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV

COMMANDS = {
    "mpi": (["-np", "2", "--mpi-flavor", "mpich", "--dry-run"], "the command"),
    "k8s": (["--workers", "1", "--mpi", "--image", "reg/distconv:1"], "the manifests"),
}


def _gone_reader() -> int:
    """The write end of a pipe whose reader is gone: each write is EPIPE."""
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    "stdout, why", [("full", "no space left on device"), ("gone", "broken pipe")]
)
def test_a_stdout_that_cannot_take_it_is_one_error_line(tmp_path, command, stdout, why):
    if stdout == "full" and not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux)")
    flags, what = COMMANDS[command]
    env = {**ENV}
    env.pop("PYTHONUNBUFFERED", None)  # a user's shell: stdout block-buffered, flushed at exit
    fd = os.open("/dev/full", os.O_WRONLY) if stdout == "full" else _gone_reader()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "launcher", command, *flags, "--", "--epochs", "1"],
            env=env, cwd=tmp_path, stdout=fd, stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(fd)
    assert done.returncode == 1, done.stderr
    said = f"distconv-launch {command}: error: cannot write {what} to stdout: {why}\n"
    assert done.stderr == said


@pytest.mark.timeout(60)
def test_a_path_stdout_cannot_encode_is_one_error_line(tmp_path):
    """``--out outé`` under ``PYTHONIOENCODING=ascii``: the command could not be encoded, and
    the launcher ended in UnicodeEncodeError's traceback."""
    env = {**ENV, "PYTHONIOENCODING": "ascii"}
    flags, what = COMMANDS["mpi"]
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "mpi", *flags, "--", "--epochs", "1", "--out", "outé"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    said = "cannot write the command to stdout: its encoding ascii cannot hold '\\xe9'"
    assert done.stderr == f"distconv-launch mpi: error: {said}\n"
