"""Mount namespaces for tests that need a real mount (a tmpfs, a read-only bind): ``unshare
-rm`` gives an unprivileged user one of its own, gone with the command it runs. Where the
system lets no user make one, such tests are skipped."""

from __future__ import annotations

import shutil
import subprocess

import pytest

#: ``unshare -rm sh -c READ_ONLY FOLDER ARGV``: ARGV run with FOLDER bound read-only onto
#: itself, in a mount namespace of its own
READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'


def can_mount() -> bool:
    """Whether ``unshare -rm`` can mount a tmpfs here."""
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "-rm", "sh", "-c", "mount -t tmpfs distconv-test /tmp"]
    return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0


#: skips a test where no mount namespace can be made
needs_mounts = pytest.mark.skipif(
    not can_mount(), reason="no mount namespace for this user (unshare -rm)"
)
