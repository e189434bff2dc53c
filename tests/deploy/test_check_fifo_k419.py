"""``distconv check-manifests``: review k419's findings on the look for other processes that
hold a FIFO named as a file, each shown by a test that failed before its fix."""

from __future__ import annotations

import os

import pytest

from tests.deploy.test_check_manifests_command import in_a_child

pytestmark = pytest.mark.timeout(30)

_CM = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n"

#: the check of ``argv[1]``, in a child process
_CHECK = (
    "import sys; from distconv.cli import main; "
    "raise SystemExit(main(['check-manifests', sys.argv[1]]))"
)


def _written_fifo(tmp_path) -> tuple[str, int]:
    """A FIFO in ``tmp_path`` that holds a ConfigMap its writer wrote and closed, and a
    descriptor of this process that holds it open to read only (so the bytes stay)."""
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)
    os.write(writer, _CM)
    os.close(writer)
    os.set_blocking(reader, True)
    return fifo, reader


def test_a_fifo_handed_down_as_stdin_by_the_process_that_started_the_check_is_read(tmp_path):
    """``timeout 60 distconv check-manifests /dev/stdin < fifo`` (or ``uv run``, or a
    ``subprocess.run(..., stdin=fifo)``): the process that started the check holds the FIFO it
    handed down, to read only, and waits: it reads nothing. It was refused as 'a FIFO another
    process holds open to read (pid N, timeout)'; it is read."""
    fifo, reader = _written_fifo(tmp_path)
    try:
        done = in_a_child("-c", _CHECK, "/dev/stdin", stdin=reader, timeout=10)
    finally:
        os.close(reader)
    assert "holds open" not in done.stderr.decode()
    assert done.returncode == 1
    assert "/dev/stdin:1: ConfigMap x: label app.kubernetes.io/name is missing" in (
        done.stdout.decode()
    )
