"""Keys that others could read or replace are refused, as ssh refuses its own; a Kubernetes
Secret's read-only mount (files ``0440`` for the pod's group, folder ``1777``) still loads.

``distconv keys`` into a folder there already kept its mode (a ``0777`` folder stayed so), and
nothing looked at a key's mode when it was loaded: a world-readable ``server.key_secret``
served silently, and a folder others can write let them put a ``worker-R.key`` of their own
there, admitted as rank R. Real files and modes, the real commands.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ps_helpers import run_pserver

from distconv.sync.ps.key_modes import NO_MODES
from distconv.sync.ps.keys import KeyFileError, server_keys, worker_keys
from tests.child_env import child_path


def _keys_cli(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "distconv", "keys", str(directory), "--workers", "2"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": child_path()},
    )  # fmt: skip


def _copy(job_keys: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(job_keys, tmp_path / "keys"))  # modes kept: 0700, 0600


def test_keys_into_a_folder_others_can_write_are_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    made = _keys_cli(shared)
    assert made.returncode != 0, made
    assert made.stderr.strip().endswith(
        f"key folder {shared} is writable by group or others (mode 0777): another user could "
        f"put a key of theirs there; run `chmod 700 {shared}`{NO_MODES}"
    ), made.stderr
    assert list(shared.iterdir()) == []  # nothing written
    shared.chmod(0o750)  # readable by the group, writable by its owner alone: taken as it is
    assert _keys_cli(shared).returncode == 0
    assert oct(shared.stat().st_mode & 0o777) == "0o750"


@pytest.mark.parametrize(
    ("target", "mode", "fix"),
    [
        ("server.key_secret", 0o644, "chmod 600"),  # readable by anyone
        ("server.key_secret", 0o640, "chmod 600"),  # by the group, on a disk it can change
        ("worker-1.key", 0o666, "chmod 644"),  # a worker's public key anyone can replace
        (".", 0o775, "chmod 700"),  # a folder its group can put a worker-R.key into (umask 002)
        # as every file and folder shows on a FAT or SMB mount, where a chmod changes nothing
        ("server.key_secret", 0o755, "chmod 600"),
        (".", 0o777, "chmod 700"),
    ],
)
def test_a_shard_refuses_keys_others_could_read_or_replace(job_keys, tmp_path, target, mode, fix):
    """Each refusal ends with the chmod that fixes it, and where the modes look like those of a
    file system that keeps none (a key file executable, a folder open to all) says that there
    a chmod changes nothing."""
    keys = _copy(job_keys, tmp_path)
    path = (keys / target).resolve()
    path.chmod(mode)
    try:
        proc = run_pserver(
            "--keys", str(keys), "--workers", "2", "--drain-seconds", "0", timeout=30
        )
    except subprocess.TimeoutExpired:  # it started, serving with the keys
        pytest.fail(f"the shard started with {path} at mode {mode:04o}")
    kind = "folder" if target == "." else "file"
    assert proc.returncode == 1, proc
    assert f"key {kind} {path} " in proc.stderr and f"(mode {mode:04o})" in proc.stderr, proc
    no_modes = NO_MODES if mode in (0o755, 0o777) else ""
    assert proc.stderr.strip().endswith(f"run `{fix} {path}`{no_modes}"), proc.stderr
    path.chmod(0o700 if target == "." else 0o600)
    server_keys(keys)  # fixed as said: loads


def test_a_worker_refuses_its_secret_key_readable_by_others(job_keys, tmp_path):
    keys = _copy(job_keys, tmp_path)
    secret = keys / "worker-1.key_secret"
    secret.chmod(0o604)
    with pytest.raises(KeyFileError, match=rf"^key file {secret} is open to group or others"):
        worker_keys(keys, 1)
    worker_keys(keys, 0)  # its own key is private: the other's mode is not its concern


#: a Kubernetes Secret volume, made in a user and mount namespace of its own: a tmpfs folder
#: ``1777`` whose files link into ``..data`` (``0440``, as ``defaultMode: 288``), mounted
#: read-only; then both sides load their keys from it
SECRET_MOUNT = """
set -e
mount -t tmpfs -o mode=1777 secret "$MNT"
mkdir "$MNT/..2026_01_01" && ln -s ..2026_01_01 "$MNT/..data"
for f in "$KEYS"/*; do
  cp "$f" "$MNT/..data/"; chmod 0440 "$MNT/..data/${f##*/}"; ln -s "..data/${f##*/}" "$MNT/"
done
mount -o remount,ro "$MNT"
python3 -c 'import sys; from distconv.sync.ps.keys import server_keys, worker_keys
server_keys(sys.argv[1]); worker_keys(sys.argv[1], 1); print("loaded")' "$MNT"
mount -o remount,rw "$MNT" && chmod 0444 "$MNT/..data/server.key_secret"
mount -o remount,ro "$MNT"  # Kubernetes' default mode: readable by others
python3 -c 'import sys; from distconv.sync.ps.keys import server_keys
server_keys(sys.argv[1])' "$MNT" || true
"""


def test_keys_on_a_read_only_secret_mount_load(job_keys, tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to mount a read-only tmpfs")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = {**os.environ, "PYTHONPATH": child_path(), "MNT": str(mnt), "KEYS": job_keys}
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", SECRET_MOUNT],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    if done.returncode != 0 and ("unshare failed" in done.stderr or "mount:" in done.stderr):
        pytest.skip(f"no user namespace or mount here: {done.stderr.strip()}")
    assert done.returncode == 0 and done.stdout.strip() == "loaded", done
    said = done.stderr.strip().splitlines()[-1]  # the 0444 secret's refusal, and its way out
    assert said.endswith(
        "server.key_secret is open to group or others (mode 0444); mount them with mode 0440 "
        "(a Secret volume's `defaultMode: 288`; a read-only bind mount's files: chmod 600 where "
        "they come from)"
    ), done.stderr
