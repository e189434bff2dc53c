"""``distconv keys`` writes the whole key set or none of it: a write that fails (a full disk, a
file size limit) left the files written so far, an empty secret file among them, which a launch
into the run directory took for the job's keys; and it said ``[Errno 27] File too large``,
naming no file. Real ``distconv keys`` processes on real files, the size limit the kernel's
(``RLIMIT_FSIZE``)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ps_helpers import run_pserver

from distconv.sync.ps import keys as keyfiles
from tests.child_env import child_env
from tests.mounts import needs_mounts

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


@pytest.mark.parametrize("links", [True, False], ids=["hard links", "no hard links"])
def test_a_failed_move_into_a_folder_takes_back_the_files_moved_before_it(
    tmp_path, monkeypatch, links
):
    """Into a folder that is there the files are moved one by one (a hard link each, a rename
    where the file system has none); a move that fails (a directory that cannot grow on a full
    disk: made to fail here, the one fault this test cannot make for real) takes back those
    moved before it."""
    moves = []
    real_link = os.link

    def moving(put):
        def move(source, target):
            moves.append(Path(target).name)
            if len(moves) == 4:
                raise OSError(28, os.strerror(28))
            put(source, target)

        return move

    def no_links(source, target):
        raise OSError(1, os.strerror(1))  # EPERM: a file system without hard links

    keys = tmp_path / "keys"
    keys.mkdir()
    monkeypatch.setattr(keyfiles.os, "link", moving(real_link) if links else no_links)
    if not links:
        monkeypatch.setattr(keyfiles.os, "rename", moving(os.replace))
    with pytest.raises(OSError) as failed:
        keyfiles.make_keys(keys, 2)
    assert failed.value.filename == str(keys / moves[3]), moves
    assert list(keys.iterdir()) == []


def _files(directory: Path) -> dict[str, bytes]:
    """The key files in ``directory`` (not a hidden stage), by name."""
    return {f.name: f.read_bytes() for f in sorted(directory.iterdir()) if f.is_file()}


#: ``distconv keys ARGS`` held once its set is written into its hidden folder, before any file
#: of it goes into place, until the file GO is there (it makes STAGED then): the moment two
#: runs cross, which no timing of real processes hits every time
HELD = """\
import runpy, sys, time
from pathlib import Path
from distconv.sync.ps import keys

staged, go = Path(sys.argv[1]), Path(sys.argv[2])
write_set = keys._write_set

def held(*args, **kwargs):
    files = write_set(*args, **kwargs)
    staged.touch()
    while not go.exists():
        time.sleep(0.01)
    return files

keys._write_set = held
sys.argv = ["distconv", *sys.argv[3:]]
runpy.run_module("distconv", run_name="__main__")
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("there", [True, False], ids=["folder there", "new folder"])
def test_a_second_distconv_keys_into_the_folder_meanwhile_is_refused_not_written_over(
    tmp_path, there
):
    """Two ``distconv keys`` into one folder that is there: each looked for keys at its start,
    found none, and moved its own set in, the second over the first, both saying it wrote its
    keys, though keys in a folder are never replaced (a job using them loses its credentials);
    into a new folder the first was refused as "cannot write DIR: directory not empty". The
    first is held once its set is staged, the second runs whole meanwhile; the first, let go,
    finds the second's keys in place and is refused, leaving them as they were."""
    keys = tmp_path / "keys"
    staged = keys if there else tmp_path  # where the first's hidden folder is made
    if there:
        keys.mkdir()
    marks = tmp_path / "marks"
    marks.mkdir()
    env = child_env(PYTHONDONTWRITEBYTECODE="1")
    first = subprocess.Popen(
        [sys.executable, "-c", HELD, str(marks / "staged"), str(marks / "go"), "keys",
         str(keys), "--workers", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (marks / "staged").exists():
            assert time.monotonic() < deadline and first.poll() is None, first.poll()
            time.sleep(0.01)
        assert not keys.exists() or not [n for n in os.listdir(keys) if not n.startswith(".")]
        second = _keys(keys, limited=False)
        assert second.returncode == 0, second.stderr
        theirs = _files(keys)
        assert len(theirs) == 6, sorted(theirs)
    finally:
        (marks / "go").touch()
        out, err = first.communicate(timeout=30)
    assert first.returncode == 1, (out, err)
    assert err == (
        f"distconv keys: error: {keys} already holds keys (put there while this run wrote its "
        "own); remove them or choose another directory\n"
    )
    assert _files(keys) == theirs  # the second's keys, each file as it wrote it
    assert [name for name in os.listdir(staged) if name.startswith(".")] == []  # no stage left


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


#: ``unshare -rm sh -c FULL MNT ARGV``: ARGV run on a tmpfs at MNT that holds 3 inodes (its
#: root, the hidden folder, ``server.key``), then its status and what MNT holds
FULL = (
    'mount -t tmpfs -o size=1m,nr_inodes=3 distconv-test "$0" && { "$@"; echo "rc=$?"; '
    'ls -A "$0"; }'
)


@needs_mounts
@pytest.mark.timeout(60)
def test_a_key_file_the_disk_has_no_inode_for_is_the_one_named(tmp_path):
    """A disk out of inodes refuses the secret file at its creation, before any byte: the file
    named was the last of the pair there, the public one, whole, so the line sent the operator
    to a file that had been written."""
    keys = tmp_path / "keys"
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", FULL, str(tmp_path), sys.executable, "-m", "distconv",
         "keys", str(keys), "--workers", "1"],
        env=child_env(PYTHONDONTWRITEBYTECODE="1"), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.stdout == "rc=1\n", done  # and nothing left on the disk
    said = f"cannot write {keys / 'server.key_secret'}: no space left on device"
    assert done.stderr == f"distconv keys: error: {said}\n", done


def _cut_after(path: Path, word: bytes) -> None:
    """``path`` cut short just past ``word`` (``b"secret-key"``): a key line without its ``=``
    and value, as a write stopped at that byte leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: data.index(word) + len(word)])


@pytest.mark.timeout(60)
def test_a_key_file_cut_short_in_a_key_line_is_refused_in_one_line_not_a_traceback(
    job_keys, tmp_path
):
    """pyzmq's reader fails on a key line without its ``=`` with an IndexError, which the key
    reader let through: the launch and ``distconv keys`` run again over such a set, and a shard
    given it, stopped on a traceback, where a file cut short elsewhere is one line naming it."""
    keys = Path(shutil.copytree(job_keys, tmp_path / "keys"))
    _cut_after(keys / "worker-1.key_secret", b"secret-key")
    again = _keys(keys, limited=False)
    assert again.returncode == 1, again
    held = (
        "worker-1.key_secret holds a key line without its value (an interrupted `distconv keys`?)"
    )
    assert again.stderr == (
        f"distconv keys: error: {keys} holds a damaged key set: {held}; remove them or choose "
        "another directory\n"
    )
    _cut_after(keys / "server.key_secret", b"public-key")
    shard = run_pserver("--keys", str(keys), "--workers", "2", "--drain-seconds", "0", timeout=30)
    assert shard.returncode == 1, shard
    assert shard.stderr.strip() == (
        f"distconv pserver: error: CURVE key file {keys / 'server.key_secret'} is unreadable: a "
        "key line without its value (a file edited or cut short? copy it again from the job's key "
        "set (made once with `distconv keys`))"
    ), shard.stderr
