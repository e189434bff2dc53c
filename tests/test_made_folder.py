"""``distconv.files.MadeFolder``: an undo removes the folder this process made, never another
made at the same path since: a shard's checkpoint folder deleted by a user and
made again by another shard was removed, by path, by the first shard's failure."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distconv.files import MadeFolder
from tests.child_env import child_env

pytestmark = pytest.mark.timeout(10)


def test_the_folder_made_and_still_empty_is_removed(tmp_path):
    made = MadeFolder.make(tmp_path / "parts")
    assert made.remove() and not (tmp_path / "parts").exists()
    assert not made.remove()  # gone: nothing to undo, no error


def test_a_folder_made_again_by_another_process_is_left(tmp_path):
    path = tmp_path / "parts"
    made = MadeFolder.make(path)
    # the user deletes it (a rename: its inode stays taken, so the new one's cannot be it)
    path.rename(tmp_path / "deleted")
    # another shard makes it again, in its own process, for its own parts
    subprocess.run([sys.executable, "-c", f"import os; os.mkdir({str(path)!r})"], check=True)
    assert not made.remove()
    assert path.is_dir()


def test_a_folder_deleted_and_made_again_with_its_inode_number_free_is_left(tmp_path):
    """Deleted by ``rmdir`` (``rm -r``), its inode number is free: ext4 gave it to the folder
    made again next, which passed as the one made here and was removed."""
    path = tmp_path / "parts"
    made = MadeFolder.make(path)
    os.rmdir(path)  # the user deletes it; another shard makes it again, at once
    os.mkdir(path)
    assert not made.remove()
    assert path.is_dir()


def test_a_folder_made_is_held_open_until_removed_or_released(tmp_path):
    made, kept = MadeFolder.make(tmp_path / "a"), MadeFolder.make(tmp_path / "b")
    held = len(os.listdir("/proc/self/fd"))
    assert made.remove() and not made.remove()
    kept.release()
    kept.release()  # once is enough; a second closes nothing (a number another file may hold)
    assert len(os.listdir("/proc/self/fd")) == held - 2
    assert not kept.remove() and kept.path.is_dir()  # released: its work is done


def test_a_folder_filled_meanwhile_or_a_file_in_its_place_is_left(tmp_path):
    made = MadeFolder.make(tmp_path / "parts")
    (tmp_path / "parts" / "shard-0.safetensors").write_bytes(b"part")
    assert not made.remove() and (tmp_path / "parts").is_dir()
    other = MadeFolder.make(tmp_path / "other")
    os.rmdir(other.path)
    other.path.write_text("a file now")
    assert not other.remove() and other.path.is_file()


def test_making_a_folder_that_is_there_raises_as_mkdir(tmp_path):
    with pytest.raises(FileExistsError):
        MadeFolder.make(tmp_path)


def test_a_folder_that_cannot_be_held_open_is_not_left_behind(tmp_path):
    """mkdir worked, the open after it did not (no descriptor left: EMFILE), and the folder the
    caller never got was left: a failed ``make_folders`` left it and, not empty, each level
    above it."""
    script = f"""
import errno, os, resource
from pathlib import Path
from distconv.sync.ps.parts import make_folders
free = os.open(os.devnull, os.O_RDONLY)
os.close(free)
resource.setrlimit(resource.RLIMIT_NOFILE, (free, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
try:
    make_folders(Path({str(tmp_path / "a" / "b")!r}))
except OSError as exc:
    assert exc.errno == errno.EMFILE, exc
else:
    raise AssertionError("made with no descriptor left")
"""
    subprocess.run([sys.executable, "-c", script], env=child_env(), check=True, timeout=30)
    assert os.listdir(tmp_path) == []
