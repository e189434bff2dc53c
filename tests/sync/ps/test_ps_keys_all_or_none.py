"""``distconv keys`` writes the whole key set or none of it: a write that fails (a full disk, a
file size limit) left the files written so far, an empty secret file among them, which a launch
into the run directory took for the job's keys; and it said ``[Errno 27] File too large``,
naming no file. Real ``distconv keys`` processes on real files, the size limit the kernel's
(``RLIMIT_FSIZE``)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.sync.ps import keys as keyfiles
from tests.child_env import child_env

#: bytes a file may grow to: less than any certificate file pyzmq writes (300 and more)
FILE_LIMIT = 200


def _limited() -> None:
    """In the child, before exec: files past :data:`FILE_LIMIT` bytes fail with ``EFBIG``
    (SIGXFSZ, which would kill it, ignored), as a write onto a full disk fails."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _keys(directory: Path, limited: bool) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "distconv", "keys", str(directory), "--workers", "2"],
        env=child_env(PYTHONDONTWRITEBYTECODE="1"), capture_output=True, text=True, timeout=60,
        preexec_fn=_limited if limited else None,
    )  # fmt: skip


@pytest.mark.timeout(60)
@pytest.mark.parametrize("there", [False, True], ids=["new folder", "empty folder"])
def test_keys_that_cannot_be_written_are_one_line_naming_the_file_and_none_are_left(
    tmp_path, there
):
    keys = tmp_path / "run" / "keys"
    if there:
        keys.mkdir(parents=True)
    done = _keys(keys, limited=True)
    assert done.returncode == 1, done
    assert done.stdout == ""
    assert (
        done.stderr == f"distconv keys: error: cannot write {keys / 'server.key'}: file too large\n"
    )
    # nothing a launch could take for keys: no folder where there was none, an empty one kept
    assert sorted(os.listdir(keys.parent)) == (["keys"] if there else [])
    assert not there or list(keys.iterdir()) == []
    made = _keys(keys, limited=False)  # room again: the same command makes the whole set
    assert made.returncode == 0, made.stderr
    server_public, _, workers = keyfiles.server_keys(keys)
    for rank in (0, 1):  # each worker's pair is the one the shard admits as that rank
        public, _, its_server = keyfiles.worker_keys(keys, rank)
        assert workers[public] == rank and its_server == server_public


def test_a_failed_move_into_a_folder_takes_back_the_files_moved_before_it(tmp_path, monkeypatch):
    """Into a folder that is there the files are moved one by one; a move that fails (a
    directory that cannot grow on a full disk: made to fail here, the one fault this test
    cannot make for real) takes back those moved before it."""
    moves = []

    def rename(source, target):
        moves.append(Path(target).name)
        if len(moves) == 4:
            raise OSError(28, os.strerror(28))
        os.replace(source, target)

    keys = tmp_path / "keys"
    keys.mkdir()
    monkeypatch.setattr(keyfiles.os, "rename", rename)
    with pytest.raises(OSError) as failed:
        keyfiles.make_keys(keys, 2)
    assert failed.value.filename == str(keys / moves[3]), moves
    assert list(keys.iterdir()) == []


#: ``make_keys(DIR, 2)`` killed (SIGKILL) as it puts its N-th file into DIR, a folder that is
#: there: the moment a kill cannot be timed at for real
KILLED_AT = """\
import os, signal, sys
from distconv.sync.ps import keys

directory, at = sys.argv[1], int(sys.argv[2])
placed = []

def killing(put):
    def place(source, target, *args, **kwargs):
        if os.path.dirname(os.fspath(target)) == directory:
            placed.append(target)
            if len(placed) == at:
                os.kill(os.getpid(), signal.SIGKILL)
        return put(source, target, *args, **kwargs)
    return place

os.rename, os.link = killing(os.rename), killing(os.link)
keys.make_keys(directory, 2)
"""


@pytest.mark.timeout(60)
def test_a_set_cut_short_by_a_kill_as_its_files_go_into_the_folder_is_never_taken_as_whole(
    tmp_path,
):
    """Into a folder that is there the files go one by one, so a kill among them leaves some:
    where those were whole pairs, the server's among them (its pair went first), they passed
    for a smaller whole set, which ``distconv keys`` run again said it "already holds" and a
    launch for that worker count took. The server's pair goes last: any cut leaves a set
    without it, refused as one an interrupted ``distconv keys`` left."""
    for at in range(2, 7):  # killed as it puts its 2nd .. 6th file: 1 to 5 of them there
        keys = tmp_path / f"keys{at}"
        keys.mkdir()
        killed = subprocess.run(
            [sys.executable, "-c", KILLED_AT, str(keys), str(at)],
            env=child_env(PYTHONDONTWRITEBYTECODE="1"), capture_output=True, text=True,
            timeout=30,
        )  # fmt: skip
        assert killed.returncode == -signal.SIGKILL, killed
        again = _keys(keys, limited=False)
        assert again.returncode == 1, (at, again)
        assert "(an interrupted `distconv keys`?); remove them" in again.stderr, (at, again)
