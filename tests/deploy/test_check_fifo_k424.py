"""``distconv check-manifests``: review k424's findings on the look for other processes that
hold a FIFO, each shown by a test that failed before its fix."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE

import pytest

from tests.child_env import child_env
from tests.deploy.test_check_fifo_k419 import _CHECK, _CM, _written_fifo
from tests.deploy.test_check_fifo_reader_k413 import _READER
from tests.deploy.test_check_manifests_command import in_a_child
from tests.deploy.test_check_manifests_review390 import _check_waiting

pytestmark = pytest.mark.timeout(30)

#: a child that holds what it inherited and reads nothing, as bash's second ``<(...)`` does
_IDLE = "import time; time.sleep(60)"


def test_a_pipe_another_process_inherited_and_does_not_read_is_read():
    """``distconv check-manifests <(render a) <(render b)``: bash hands the second ``<(...)``'s
    process the read end of the first's pipe, and ``cmd | distconv check-manifests /dev/stdin
    <(render)`` hands the pipe on stdin to the ``<(...)``'s process. Neither reads it, nor is
    either the check's ancestor: the pipe was refused as 'a FIFO another process holds open to
    read (pid N, bash)', where it is valid input. Here a sibling holds the pipe's read end."""
    read, write = os.pipe()
    idle = subprocess.Popen([sys.executable, "-c", _IDLE], pass_fds=(read,))
    try:
        os.write(write, _CM)
        os.close(write)
        done = in_a_child("-c", _CHECK, "/dev/stdin", stdin=read, timeout=10)
    finally:
        os.close(read)
        idle.kill()
        idle.wait(timeout=10)
    assert "holds open" not in done.stderr.decode()
    assert done.returncode == 1
    assert "/dev/stdin:1: ConfigMap x: label app.kubernetes.io/name is missing" in (
        done.stdout.decode()
    )


#: a program that starts, with the FIFO on its stdin, a child that inherits it and reads
#: nothing, then the check of ``/dev/stdin`` (``bash ci.sh < fifo``, where ``ci.sh`` runs
#: ``distconv check-manifests /dev/stdin <(render)``: bash hands its stdin to the ``<(...)``)
_HANDS_DOWN = (
    "import subprocess, sys; "
    "idle = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "done = subprocess.run([sys.executable, '-c', sys.argv[1], '/dev/stdin']); "
    "idle.kill(); idle.wait(); raise SystemExit(done.returncode)"
)


def test_a_fifo_a_sibling_inherited_from_the_check_s_parent_is_read(tmp_path):
    """``bash ci.sh < fifo``, ``ci.sh`` running ``distconv check-manifests /dev/stdin
    <(render)`` (or ``{ distconv check-manifests /dev/stdin <(render); } < fifo``): the
    ``<(...)``'s process inherits the shell's stdin, the FIFO, to read only, and reads nothing.
    Only the check's ancestors were skipped, so the FIFO was refused as 'a FIFO another
    process holds open to read (pid N, bash)'. A process that descends from the ancestor that
    handed the FIFO down to read only got it from that one; it is read."""
    fifo, reader = _written_fifo(tmp_path)
    try:
        done = in_a_child("-c", _HANDS_DOWN, _CHECK, stdin=reader, timeout=10)
    finally:
        os.close(reader)
    assert "holds open" not in done.stderr.decode()
    assert done.returncode == 1
    assert "/dev/stdin:1: ConfigMap x: label app.kubernetes.io/name is missing" in (
        done.stdout.decode()
    )


#: the check of stdin (``-``), in a child process
_CHECK_STDIN = "from distconv.cli import main; raise SystemExit(main(['check-manifests', '-']))"


def test_a_fifo_on_stdin_the_check_itself_holds_open_to_write_is_refused_at_once(tmp_path):
    """``exec 3<>fifo; exec distconv check-manifests - < fifo``: as with the FIFO named as a
    file (7cb7f1c2), the check's own descriptor 3 is a writer no one closes, so the manifests
    a writer sends and closes never end. Stdin (``-``) was not looked at, and it read for ever;
    it is refused at once, naming the descriptor."""
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    shell = 'exec 3<>"$1"; exec "$2" -c "$3" < "$1"'  # the shell's process becomes the check's
    done = subprocess.run(
        ["sh", "-c", shell, "sh", fifo, sys.executable, _CHECK_STDIN],
        capture_output=True,
        env=child_env(),
        timeout=8,
    )
    assert (done.returncode, done.stdout) == (2, b"")
    assert "<stdin>: a FIFO this check holds open to write too (fd 3)" in done.stderr.decode()


#: the FUSE file system a test mounts (root only)
_FUSE_STUB = str(Path(__file__).with_name("fuse_stub.py"))


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/fuse"), reason="mounting FUSE needs root"
)
def test_a_process_holding_a_file_on_a_stuck_fuse_mount_does_not_hang_the_check(tmp_path):
    """216acd6c compared holders by ``stat`` of their descriptors' links where their inode
    number is the FIFO's: a ``stat`` reaches the file's file system, so a process holding a
    file of a FUSE (or NFS) server that is gone hung the check for ever, uninterruptibly.
    Other processes are no longer looked at at all (k429); this keeps any look from coming
    back that waits on them. Here the stuck file shares the FIFO's inode number."""
    fifo, mountpoint = tmp_path / "job.yaml", tmp_path / "mnt"
    os.mkfifo(fifo)
    mountpoint.mkdir()
    inode = str(os.stat(fifo).st_ino)
    stub = subprocess.Popen([sys.executable, _FUSE_STUB, str(mountpoint), inode], stdout=PIPE)
    holder = None
    try:
        assert stub.stdout is not None
        if stub.stdout.readline() != b"mounted\n":
            pytest.skip("FUSE cannot be mounted here")
        holder = subprocess.Popen(
            [sys.executable, "-c", _READER, str(mountpoint / "x")], stdout=PIPE
        )
        assert holder.stdout is not None and holder.stdout.readline() == b"open\n"
        os.kill(stub.pid, signal.SIGSTOP)  # the server is gone: a stat of x waits for ever
        status, out, err = _check_waiting(fifo, wait_s=0.5, timeout=8)
    finally:  # the server first: the holder's close asks it, and waits for it
        for child in (stub, holder):
            if child is not None:
                child.kill()
                child.wait(timeout=10)
        ctypes.CDLL(None).umount2(str(mountpoint).encode(), 2)  # MNT_DETACH
    assert (status, out) == (2, "")
    assert f"{fifo}: a FIFO nothing opened to write in 0.5 s" in err
