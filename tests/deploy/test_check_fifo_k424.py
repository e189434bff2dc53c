"""``distconv check-manifests``: review k424's findings on the look for other processes that
hold a FIFO, each shown by a test that failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.deploy.test_check_fifo_k419 import _CHECK, _CM
from tests.deploy.test_check_manifests_command import in_a_child

pytestmark = pytest.mark.timeout(30)

#: a child that holds what it inherited and reads nothing, as bash's second ``<(...)`` does
_IDLE = "import time; time.sleep(60)"


def test_a_pipe_another_process_inherited_and_does_not_read_is_read():
    """``distconv check-manifests <(render a) <(render b)``: bash hands the second ``<(...)``'s
    process the read end of the first's pipe, and ``cmd | distconv check-manifests /dev/stdin
    <(render)`` hands the pipe on stdin to the ``<(...)``'s process. Neither reads it, nor is
    either the check's ancestor: the pipe was refused as 'a FIFO another process holds open to
    read (pid N, bash)', where it is valid input. Here a sibling holds the pipe's read end."""
    read, write = os.pipe()
    idle = subprocess.Popen([sys.executable, "-c", _IDLE], pass_fds=(read,))
    try:
        os.write(write, _CM)
        os.close(write)
        done = in_a_child("-c", _CHECK, "/dev/stdin", stdin=read, timeout=10)
    finally:
        os.close(read)
        idle.kill()
        idle.wait(timeout=10)
    assert "holds open" not in done.stderr.decode()
    assert done.returncode == 1
    assert "/dev/stdin:1: ConfigMap x: label app.kubernetes.io/name is missing" in (
        done.stdout.decode()
    )
