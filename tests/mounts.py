"""Mount namespaces for tests that need a real mount (a tmpfs, a read-only bind): ``unshare
-rm`` gives an unprivileged user one of its own, gone with the command it runs. Where the
system lets no user make one, such tests are skipped, and the skip says why (``unshare``'s own
words: user namespaces turned off, a container's seccomp profile, AppArmor's restriction)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from subprocess import PIPE

import pytest

#: ``unshare -rm sh -c READ_ONLY FOLDER ARGV``: ARGV run with FOLDER bound read-only onto
#: itself, in a mount namespace of its own
READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'

#: ``unshare -rm`` making a tmpfs: what :func:`mount_problem` runs (``sh`` left to exit itself)
PROBE = ["unshare", "-rm", "sh", "-c", "mount -t tmpfs distconv-test /tmp"]

#: seconds the probe may take: it runs as each test module that needs it is collected
PROBE_SECONDS = 10


def mount_problem(probe: list[str] = PROBE) -> str | None:
    """Why ``unshare -rm`` cannot mount a tmpfs here, in a line; None where it can. A probe
    that cannot start or does not end is a reason to skip, not an error: raised at collection,
    it failed every module that imports this one, on a clean clone's CI too. One that does not
    end is killed with all it started (its own session), so nothing of it outlives the test
    run: killing the probe alone left a child it forked running, holding its pipes."""
    if shutil.which(probe[0]) is None:
        return f"no {probe[0]} on PATH"
    try:
        child = subprocess.Popen(probe, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True)
    except OSError as exc:
        return f"{probe[0]} cannot run: {exc}"
    with child:
        try:
            out, err = child.communicate(timeout=PROBE_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            return f"{' '.join(probe)} did not end within {PROBE_SECONDS} s"
    if child.returncode == 0:
        return None
    said = " ".join((err or out).split())[:300] or f"exit {child.returncode}"
    return f"{' '.join(probe)} failed: {said}"


def can_mount() -> bool:
    """Whether ``unshare -rm`` can mount a tmpfs here."""
    return mount_problem() is None


_PROBLEM = mount_problem()

#: skips a test where no mount namespace can be made, saying why
needs_mounts = pytest.mark.skipif(
    _PROBLEM is not None, reason=f"no mount namespace for this user (unshare -rm): {_PROBLEM}"
)
