"""Checkpoints are written atomically: a full disk, a failed rename or SIGKILL mid-save leaves
the previous checkpoint whole, and stale temp files go."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import distconv.files as files_module
from distconv.checkpoint import CheckpointError, load_checkpoint
from tests.checkpoint_model import save_small, small_model
from tests.child_env import child_path

REPO = Path(__file__).resolve().parents[1]


def _assert_holds(path, params, step):
    ckpt = load_checkpoint(path)
    assert ckpt.step == step
    for p in params:
        np.testing.assert_array_equal(ckpt.params[p.name], p.value)
    assert sorted(os.listdir(path.parent)) == [path.name]  # no temp file left


def _enospc_after_first_chunk(path):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_disk_full_names_the_file_and_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.safetensors"
    first = small_model(0)
    save_small(path, first, None, step=1)
    # the disk fills up after the first chunk of the new file is written
    monkeypatch.setattr(files_module, "write_hook", _enospc_after_first_chunk)
    with pytest.raises(CheckpointError) as info:
        save_small(path, small_model(1), None, step=2)
    msg = str(info.value)
    assert f"cannot save checkpoint {path}: no space left on device" in msg
    assert "any checkpoint before it is intact" in msg  # there may be none
    assert "\n" not in msg
    _assert_holds(path, first, step=1)


#: saves a small checkpoint, then a larger one over it past RLIMIT_FSIZE: a full disk as the
#: writing process meets it (EFBIG from write), not a mocked write
_SAVE_PAST_THE_LIMIT = """
import resource, signal, sys
import numpy as np
from distconv.checkpoint import CheckpointError, save_checkpoint
from distconv.parameter import Parameter
path = sys.argv[1]
save_checkpoint(path, [Parameter("w", np.full(8, 1.5))], step=1)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
try:
    save_checkpoint(path, [Parameter("w", np.full(100_000, 2.5))], step=2)
except CheckpointError as exc:
    print(exc)
"""


@pytest.mark.timeout(60)
def test_a_save_that_fills_the_disk_for_real_leaves_the_previous_checkpoint(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, "-c", _SAVE_PAST_THE_LIMIT, str(path)],
        env=env, capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"cannot save checkpoint {path}: file too large" in done.stdout, done.stdout
    ckpt = load_checkpoint(path)
    assert ckpt.step == 1
    np.testing.assert_array_equal(ckpt.params["w"], np.full(8, 1.5))
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary file left


def test_failed_rename_names_the_cause(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.safetensors"
    first = small_model(0)
    save_small(path, first, None, step=1)

    def refuse(src, dst):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(dst))

    monkeypatch.setattr(files_module.os, "replace", refuse)
    with pytest.raises(CheckpointError, match=r"cannot save checkpoint .*: permission denied"):
        save_small(path, small_model(1), None, step=2)
    monkeypatch.undo()
    _assert_holds(path, first, step=1)


def test_stale_temp_files_are_removed_by_the_next_save(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    stale = tmp_path / ".checkpoint.safetensors.abc123.tmp"
    stale.write_bytes(b"left by a killed writer")
    unrelated = tmp_path / ".other.tmp"
    unrelated.write_bytes(b"")
    save_small(path, small_model(), None)
    assert not stale.exists() and unrelated.exists()


# The writer stops inside its second save, after the first chunk, and says so: the parent kills
# it only then, so the kill provably lands in the middle of a save (no sleep-and-hope).
WRITER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import distconv.checkpoint as checkpoint
    import distconv.files as files
    from distconv.parameter import Parameter

    path = sys.argv[1]
    checkpoint.CHUNK = 1 << 16
    params = [Parameter(f"w{i}", np.zeros(100_000, np.float32)) for i in range(4)]
    for step in (1, 2):
        for p in params:
            p.value[...] = step
        if step == 2:
            def stop(target):
                print("inside save 2", flush=True)
                time.sleep(600)
            files.write_hook = stop
        checkpoint.save_checkpoint(path, params, step=step)
        print(f"saved {step}", flush=True)
    """
)


@pytest.mark.timeout(60)
def test_writer_killed_mid_save_leaves_the_previous_checkpoint_whole(tmp_path):
    """SIGKILL a process in the middle of writing its second checkpoint; the first survives."""
    path = tmp_path / "checkpoint.safetensors"
    env = {**os.environ, "PYTHONPATH": child_path()}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "saved 1"
        assert proc.stdout.readline().strip() == "inside save 2"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    temps = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(temps) == 1  # the kill left a half-written second save behind
    ckpt = load_checkpoint(path)
    assert ckpt.step == 1
    for a in ckpt.params.values():
        assert (a == 1).all()  # every tensor from the same save as the metadata


@pytest.mark.parametrize(
    "umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o027, 0o640)], ids=["022", "077", "027"]
)
def test_a_checkpoint_gets_the_permissions_the_umask_allows(tmp_path, umask, mode):
    """The file was chmod to 0644 whatever the umask: under 077 (a shared cluster's private
    runs) every checkpoint, manifest and metrics log was readable by everyone."""
    path = tmp_path / "c.safetensors"
    previous = os.umask(umask)
    try:
        save_small(path, small_model(), None)
    finally:
        os.umask(previous)
    assert oct(path.stat().st_mode & 0o777) == oct(mode)
