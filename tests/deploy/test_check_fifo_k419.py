"""``distconv check-manifests``: review k419's findings on a FIFO named as a file, each shown by
a test that failed before its fix (its hard-link reader's test went with the look at other
processes, k429)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
import yaml

from distconv.deploy import check_command
from tests.child_env import child_env
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


def test_a_fifo_the_check_itself_was_handed_open_to_write_is_refused_at_once(tmp_path):
    """``exec 3<>fifo; exec distconv check-manifests fifo`` (or ``... fifo 3<>fifo``): the
    check's own process holds the FIFO open to write on a descriptor it was handed, so no
    writer's close ever ends what it reads. Its own process was not looked at, and it read for
    ever; it is refused at once, naming the descriptor."""
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    shell = 'exec 3<>"$1"; exec "$2" -c "$3" "$1"'  # the shell's process becomes the check's
    done = subprocess.run(
        ["sh", "-c", shell, "sh", fifo, sys.executable, _CHECK],
        capture_output=True,
        env=child_env(),
        timeout=8,
    )
    assert (done.returncode, done.stdout) == (2, b"")
    assert f"{fifo}: a FIFO this check holds open to write too (fd " in done.stderr.decode()


def test_a_fifo_a_thread_of_the_reading_process_writes_is_read(tmp_path):
    """A program that reads the manifests in its own process (``read_sources``) while a thread
    of it writes the FIFO holds it open to write itself: that writer closes, so the FIFO ends.
    Only a descriptor handed down (not close-on-exec) is one that never closes."""
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so that the writer's open returns
    writer = os.open(fifo, os.O_WRONLY)  # close-on-exec, as this process opens each
    os.close(held)
    late = threading.Thread(target=_write_late, args=(writer,), daemon=True)
    late.start()
    try:
        sources = check_command.read_sources([fifo])
    finally:
        late.join(5)
    assert sources == [(f"{fifo}:1", yaml.safe_load(_CM))]


def _write_late(writer: int) -> None:
    """Write the ConfigMap on descriptor ``writer`` once the check reads it, then close it."""
    time.sleep(0.3)
    try:
        os.write(writer, _CM)
    finally:
        os.close(writer)
