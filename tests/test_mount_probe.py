"""The probe that decides whether the tests needing a mount namespace run (tests/mounts.py):
where ``unshare -rm`` cannot mount, they are skipped with ``unshare``'s own words, and a probe
that hangs or cannot start is a skip too, not an error that fails the collection of every
module needing it. Real programs, stand-ins for ``unshare`` as a system refusing it runs one."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests import mounts


def _stand_in(tmp_path, body: str) -> list[str]:
    """A ``unshare`` of ``body`` (a shell script's), as the probe would run it."""
    script = tmp_path / "unshare"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return [str(script), *mounts.PROBE[1:]]


def test_a_refused_namespace_is_a_skip_naming_unshares_words(tmp_path):
    words = "unshare: unshare failed: Operation not permitted"
    probe = _stand_in(tmp_path, f"echo '{words}' >&2; exit 1")
    assert mounts.mount_problem(probe) == f"{' '.join(probe)} failed: {words}"


@pytest.mark.timeout(30)
def test_a_probe_that_hangs_is_a_skip_not_a_collection_error(tmp_path, monkeypatch):
    monkeypatch.setattr(mounts, "PROBE_SECONDS", 1)
    probe = _stand_in(tmp_path, "exec sleep 20")
    began = time.monotonic()
    assert mounts.mount_problem(probe) == f"{' '.join(probe)} did not end within 1 s"
    assert time.monotonic() - began < 10


@pytest.mark.timeout(30)
def test_a_hung_probe_leaves_nothing_it_started_running(tmp_path, monkeypatch):
    """Killed alone, the probe left the child it had forked (a ``sleep`` here) running after
    the test run, holding the probe's pipes."""
    monkeypatch.setattr(mounts, "PROBE_SECONDS", 1)
    pid_file = tmp_path / "child.pid"
    probe = _stand_in(tmp_path, f"sleep 20 & echo $! > {pid_file}; wait")
    assert mounts.mount_problem(probe) == f"{' '.join(probe)} did not end within 1 s"
    child = int(pid_file.read_text())
    try:
        deadline = time.monotonic() + 5
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child), f"the probe's child {child} outlived it"
    finally:
        if _running(child):
            os.kill(child, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead and not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_probe_that_cannot_start_or_is_missing_is_a_skip(tmp_path):
    assert mounts.mount_problem([str(tmp_path / "missing")]) == f"no {tmp_path}/missing on PATH"
    probe = _stand_in(tmp_path, "")
    (tmp_path / "unshare").write_text("#!/no/such/shell\n")  # found, yet exec fails
    assert mounts.mount_problem(probe).startswith(f"{probe[0]} cannot run: "), probe


def test_the_skip_says_why_and_matches_the_probe():
    reason = mounts.needs_mounts.kwargs["reason"]
    assert reason.startswith("no mount namespace for this user (unshare -rm): ")
    assert mounts.needs_mounts.args[0] == (mounts.mount_problem() is not None)
