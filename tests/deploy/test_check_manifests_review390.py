"""``distconv check-manifests``: review k390's findings, each shown by a test that failed
before its fix: the count after the places a line names, a FIFO with no writer, and the
recursion limit raised while reading."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from distconv.deploy import located
from tests.deploy.test_check_manifests_command import in_a_child, one_error

pytestmark = pytest.mark.timeout(60)


def _unlabelled_places(sources: list) -> set[str]:
    """The places each line of the problems of ``sources`` names (all lines alike)."""
    lines = located.located_problems(sources)
    return {line.split(": ConfigMap", 1)[0] for line in lines}


def test_the_count_after_the_places_names_what_it_counts():
    """Seven unnamed ConfigMaps in one file are seven documents, not seven files: the line names
    five and says ``2 more documents`` (it said ``2 more`` where the docs said files), and one
    left over is ``1 more document``."""
    many = [(f"all.yaml:{2 * i + 1}", {"kind": "ConfigMap"}) for i in range(7)]
    named = ", ".join(f"all.yaml:{2 * i + 1}" for i in range(5))
    assert _unlabelled_places(many) == {f"{named} and 2 more documents"}
    assert _unlabelled_places(many[:6]) == {f"{named} and 1 more document"}
    assert _unlabelled_places(many[:5]) == {named}


def _check_waiting(path: Path, wait_s: float | None = None, timeout: float = 10):
    """``distconv check-manifests PATH`` in a child process, its FIFO wait set to ``wait_s``
    where given: its exit status, stdout and stderr. ``timeout`` bounds it: a hang fails."""
    shrink = "" if wait_s is None else f"c.FIFO_WAIT_S = {wait_s}; "
    code = (
        "import sys; from distconv.deploy import check_command as c; "
        f"{shrink}from distconv.cli import main; "
        "raise SystemExit(main(['check-manifests', sys.argv[1]]))"
    )
    done = in_a_child("-c", code, str(path), timeout=timeout)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_a_fifo_nobody_writes_to_is_refused_in_bounded_time(tmp_path):
    """A FIFO with no writer is refused after ``FIFO_WAIT_S`` with one line naming it: opening
    it hung the command for ever (a CI step never ended)."""
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    status, out, err = _check_waiting(fifo, wait_s=0.2)
    assert time.monotonic() - started < 5
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {fifo}: a FIFO nothing wrote to in 0.2 s"
    )


def test_a_fifo_written_to_late_is_read(tmp_path):
    """A FIFO whose writer opens it a while after the command does (``<(helm template ...)``
    renders first) is read as a file is: its problem is named at ``FIFO:1``."""
    fifo = tmp_path / "rendered.yaml"
    os.mkfifo(fifo)

    def write_late() -> None:
        time.sleep(0.3)
        with open(fifo, "w") as writer:  # opens once the command has it open to read
            writer.write("kind: ConfigMap\nmetadata:\n  name: c\n")

    writer = threading.Thread(target=write_late, daemon=True)
    writer.start()
    status, out, err = _check_waiting(fifo)
    writer.join(5)
    assert (status, err) == (1, "")
    assert out.splitlines()[0] == f"{fifo}:1: ConfigMap c: label app.kubernetes.io/name is missing"
