"""Mount namespaces for tests that need a real mount (a tmpfs, a read-only bind): ``unshare
-rm`` gives an unprivileged user one of its own, gone with the command it runs. Where the
system lets no user make one, such tests are skipped, and the skip says why (``unshare``'s own
words: user namespaces turned off, a container's seccomp profile, AppArmor's restriction)."""

from __future__ import annotations

import shutil
import subprocess

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
    it failed every module that imports this one, on a clean clone's CI too."""
    if shutil.which(probe[0]) is None:
        return f"no {probe[0]} on PATH"
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        return f"{' '.join(probe)} did not end within {PROBE_SECONDS} s"
    except OSError as exc:
        return f"{probe[0]} cannot run: {exc}"
    if done.returncode == 0:
        return None
    said = " ".join((done.stderr or done.stdout).split())[:300] or f"exit {done.returncode}"
    return f"{' '.join(probe)} failed: {said}"


def can_mount() -> bool:
    """Whether ``unshare -rm`` can mount a tmpfs here."""
    return mount_problem() is None


_PROBLEM = mount_problem()

#: skips a test where no mount namespace can be made, saying why
needs_mounts = pytest.mark.skipif(
    _PROBLEM is not None, reason=f"no mount namespace for this user (unshare -rm): {_PROBLEM}"
)
