"""``distconv check-manifests`` reading a FIFO named as a file: one nobody writes to is refused in
bounded time, one written late is read (and the late writer ends where no reader comes); one
the process that started the check, a thread of the check, a sibling or an idle process that
inherited it writes or holds is read; one the check itself holds open to write (as a file or on
stdin) is refused at once; a silent writer holding it both ways is noted once; a reader
elsewhere is named as a possibility where the wait ends or the text cannot be read. Other
processes are never looked at (``/proc`` shows who holds a FIFO, not who reads it), so a
process stuck on a FUSE mount does not hang the check. Real FIFOs and subprocesses."""

from __future__ import annotations

import array
import fcntl
import os
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
import yaml

from distconv.deploy import check_command, fifo_readers
from tests.child_env import child_env
from tests.deploy.test_check_manifests_command import in_a_child, one_error

pytestmark = pytest.mark.timeout(60)


def _check_waiting(path: Path, wait_s: float | None = None, timeout: float = 10):
    """``distconv check-manifests PATH`` in a child process, its FIFO wait set to ``wait_s``
    where given: its exit status, stdout and stderr. ``timeout`` bounds it: a hang fails."""
    shrink = "" if wait_s is None else f"c.FIFO_WAIT_S = {wait_s}; "
    code = (
        "import sys; from distconv.deploy import check_command as c; "
        f"{shrink}from distconv.cli import main; "
        "raise SystemExit(main(['check-manifests', sys.argv[1]]))"
    )
    done = in_a_child("-c", code, str(path), timeout=timeout)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_a_fifo_nobody_writes_to_is_refused_in_bounded_time(tmp_path):
    """A FIFO with no writer is refused after ``FIFO_WAIT_S`` with one line naming it: opening
    it hung the command for ever (a CI step never ended)."""
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    status, out, err = _check_waiting(fifo, wait_s=0.2)
    assert time.monotonic() - started < 5
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {fifo}: a FIFO nothing opened to write in 0.2 s (or "
        "another process read what was written: a FIFO gives each byte to one reader)"
    )


def _write_when_read(fifo: Path, text: str, after_s: float, within_s: float) -> threading.Thread:
    """A thread that, ``after_s`` from now, writes ``text`` to ``fifo`` once a reader has it
    open, and gives up ``within_s`` from now where none does: a blocking ``open`` of a FIFO
    whose reader died first waited for ever, a stuck thread left in the pytest worker."""
    deadline = time.monotonic() + within_s

    def write() -> None:
        time.sleep(after_s)
        while True:
            try:  # ENXIO while no reader has it open: looked at again, not waited on for ever
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                break
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)
        os.set_blocking(fd, True)
        with open(fd, "w") as writer:
            writer.write(text)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_fifo_written_to_late_is_read(tmp_path):
    """A FIFO whose writer opens it a while after the command does (``<(helm template ...)``
    renders first) is read as a file is: its problem is named at ``FIFO:1``."""
    fifo = tmp_path / "rendered.yaml"
    os.mkfifo(fifo)
    writer = _write_when_read(fifo, "kind: ConfigMap\nmetadata:\n  name: c\n", 0.3, 10)
    status, out, err = _check_waiting(fifo)
    writer.join(5)
    assert (status, err) == (1, "")
    assert out.splitlines()[0] == f"{fifo}:1: ConfigMap c: label app.kubernetes.io/name is missing"


def test_the_late_writer_ends_where_no_reader_ever_comes(tmp_path):
    """Where the child dies before it opens the FIFO, the writer gives up within its bound
    instead of staying blocked in ``open`` for the rest of the pytest worker."""
    fifo = tmp_path / "rendered.yaml"
    os.mkfifo(fifo)
    writer = _write_when_read(fifo, "kind: ConfigMap\n", 0, 0.2)
    writer.join(3)
    assert not writer.is_alive()


_CM = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n"


#: the check of ``argv[1]``, in a child process
_CHECK = (
    "import sys; from distconv.cli import main; "
    "raise SystemExit(main(['check-manifests', sys.argv[1]]))"
)


def _written_fifo(tmp_path, text: bytes = _CM) -> tuple[str, int]:
    """A FIFO in ``tmp_path`` that holds ``text`` (a ConfigMap) its writer wrote and closed,
    and a descriptor of this process that holds it open to read only (so the bytes stay)."""
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)
    os.write(writer, text)
    os.close(writer)
    os.set_blocking(reader, True)
    return fifo, reader


def _read_as_stdin(reader: int, *args: str) -> None:
    """``python -c *args`` run with the FIFO ``reader`` (closed after) as its stdin checks it:
    not refused as held open, its ConfigMap's problem named at ``/dev/stdin:1``."""
    try:
        done = in_a_child("-c", *args, stdin=reader, timeout=10)
    finally:
        os.close(reader)
    assert "holds open" not in done.stderr.decode()
    assert done.returncode == 1
    assert "/dev/stdin:1: ConfigMap x: label app.kubernetes.io/name is missing" in (
        done.stdout.decode()
    )


def test_a_fifo_handed_down_as_stdin_by_the_process_that_started_the_check_is_read(tmp_path):
    """``timeout 60 distconv check-manifests /dev/stdin < fifo`` (or ``uv run``, or a
    ``subprocess.run(..., stdin=fifo)``): the process that started the check holds the FIFO it
    handed down, to read only, and waits: it reads nothing. It was refused as 'a FIFO another
    process holds open to read (pid N, timeout)'; it is read."""
    fifo, reader = _written_fifo(tmp_path)
    _read_as_stdin(reader, _CHECK, "/dev/stdin")


def _run_in_shell(shell: str, fifo: str, program: str) -> subprocess.CompletedProcess:
    """``sh -c SHELL sh FIFO PYTHON PROGRAM``: a shell line that opens descriptors and then
    ``exec``s the check, so the check's own process holds what the shell opened."""
    return subprocess.run(
        ["sh", "-c", shell, "sh", fifo, sys.executable, program],
        capture_output=True,
        env=child_env(),
        timeout=8,
    )


def test_a_fifo_the_check_itself_was_handed_open_to_write_is_refused_at_once(tmp_path):
    """``exec 3<>fifo; exec distconv check-manifests fifo`` (or ``... fifo 3<>fifo``): the
    check's own process holds the FIFO open to write on a descriptor it was handed, so no
    writer's close ever ends what it reads. Its own process was not looked at, and it read for
    ever; it is refused at once, naming the descriptor."""
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    shell = 'exec 3<>"$1"; exec "$2" -c "$3" "$1"'  # the shell's process becomes the check's
    done = _run_in_shell(shell, fifo, _CHECK)
    assert (done.returncode, done.stdout) == (2, b"")
    assert f"{fifo}: a FIFO this check holds open to write too (fd " in done.stderr.decode()


def test_a_fifo_a_thread_of_the_reading_process_writes_is_read(tmp_path):
    """A program that reads the manifests in its own process (``read_sources``) while a thread
    of it writes the FIFO holds it open to write itself: that writer closes, so the FIFO ends.
    Only a descriptor handed down (not close-on-exec) is one that never closes."""
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so that the writer's open returns
    writer = os.open(fifo, os.O_WRONLY)  # close-on-exec, as this process opens each
    os.close(held)
    late = threading.Thread(target=_write_late, args=(writer,), daemon=True)
    late.start()
    try:
        sources = check_command.read_sources([fifo])
    finally:
        late.join(5)
    assert sources == [(f"{fifo}:1", yaml.safe_load(_CM))]


def _write_late(writer: int) -> None:
    """Write the ConfigMap on descriptor ``writer`` once the check reads it, then close it."""
    time.sleep(0.3)
    try:
        os.write(writer, _CM)
    finally:
        os.close(writer)


#: a child that opens the FIFO argv[1] to read (not blocking: no writer), says so, then waits
_READER = (
    "import os, sys, time; os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK); "
    "print('open', flush=True); time.sleep(60)"
)


def test_a_fifo_another_process_reads_ends_in_the_wait_naming_that_possibility(tmp_path):
    """A FIFO with no writer that another process holds open to read (a stale reader, a second
    check): an earlier fix refused it at once by a look at the other processes, which could
    not tell a reader from a holder and refused valid input, so that look is gone. The
    bounded wait ends it, its one line naming both possibilities, not guessing which."""
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(fifo)], stdout=subprocess.PIPE)
    try:
        assert reader.stdout is not None and reader.stdout.readline() == b"open\n"
        started = time.monotonic()
        status, out, err = _check_waiting(fifo, wait_s=0.5)
        took = time.monotonic() - started
    finally:
        reader.kill()
        reader.wait(timeout=10)
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {fifo}: a FIFO nothing opened to write in 0.5 s (or "
        "another process read what was written: a FIFO gives each byte to one reader)"
    )
    assert took >= 0.5  # the wait, not a refusal at once


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
    _read_as_stdin(reader, _HANDS_DOWN, _CHECK)


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
    done = _run_in_shell(shell, fifo, _CHECK_STDIN)
    assert (done.returncode, done.stdout) == (2, b"")
    assert "<stdin>: a FIFO this check holds open to write too (fd 3)" in done.stderr.decode()


#: the line the check prints for the ConfigMap ``_CM`` read from FIFO ``{}``
_CM_PROBLEM = "{}:1: ConfigMap x: label app.kubernetes.io/name is missing"


def _check(fifo: str, wait_s: float) -> subprocess.Popen:
    """``distconv check-manifests FIFO`` started in a child, its wait set to ``wait_s``."""
    code = f"from distconv.deploy import check_command as c; c.FIFO_WAIT_S = {wait_s}; {_CHECK}"
    return subprocess.Popen(
        [sys.executable, "-c", code, fifo],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    )


def _wait_read(fd: int, check: subprocess.Popen, within_s: float = 10) -> None:
    """Wait until the bytes in the FIFO this test holds on ``fd`` are read (``FIONREAD``), or
    ``check`` has ended: then the writer's close cannot come before the check opened it."""
    deadline = time.monotonic() + within_s
    waiting = array.array("i", [1])
    while waiting[0] and check.poll() is None and time.monotonic() < deadline:
        fcntl.ioctl(fd, termios.FIONREAD, waiting)
        time.sleep(0.01)


def test_a_fifo_an_idle_process_inherited_from_a_parent_that_closed_it_is_read(tmp_path):
    """``(sleep 1; cat a.yaml > f) & exec 3<f; sleep 5 & exec 3<&-; distconv check-manifests
    f``: the ``sleep`` inherited fd 3 from the shell, which then closed its own, so ``sleep``
    descends from no process that still hands the FIFO down. It reads nothing, yet it was
    refused as 'a FIFO another process holds open to read (pid N, sleep)'."""
    fifo, reader = _written_fifo(tmp_path)
    idle = subprocess.Popen([sys.executable, "-c", _IDLE], pass_fds=(reader,))
    os.close(reader)  # the bytes stay: the idle child holds the FIFO
    try:
        status, out, err = _check_waiting(fifo, wait_s=5)
    finally:
        idle.kill()
        idle.wait(timeout=10)
    assert (status, err) == (1, "")
    assert out.splitlines()[0] == _CM_PROBLEM.format(fifo)


def test_a_fifo_a_writer_holds_both_ways_writes_and_closes_is_read(tmp_path):
    """``distconv check-manifests f & exec 3<>f; cat a.yaml >&3; exec 3>&-`` (or a program that
    opens it ``O_RDWR``, writes, and closes): the writer held it both ways, and was refused as
    'a FIFO another process holds open to read', the manifests unread. It is read, and ends
    at the writer's close."""
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the bytes stay whenever the check opens
    both = os.open(fifo, os.O_RDWR)  # close-on-exec: the check's child does not get it
    os.write(both, _CM)
    check = _check(fifo, wait_s=5)
    try:
        _wait_read(keep, check)
        os.close(both)
        out, err = check.communicate(timeout=10)
    finally:
        os.close(keep)
        check.kill()
        check.wait(timeout=10)
    assert (check.returncode, err) == (1, b"")
    assert out.decode().splitlines()[0] == _CM_PROBLEM.format(fifo)


def test_a_fifo_a_silent_writer_holds_both_ways_is_noted_once_and_read(tmp_path):
    """A process that holds the FIFO both ways and writes nothing (``exec 3<>f`` in another
    shell) looks like a writer still rendering: it was refused at once. It is read however
    long it takes, as stdin is, with one note on stderr once the wait is over; here that
    writer then writes and closes, and the manifests are checked."""
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    both = os.open(fifo, os.O_RDWR)
    check = _check(fifo, wait_s=0.3)
    try:
        assert check.stderr is not None
        note = check.stderr.readline().decode()  # the child's start, then the 0.3 s wait
        os.write(both, _CM)
        os.close(both)
        out, err = check.communicate(timeout=10)
    finally:
        check.kill()
        check.wait(timeout=10)
    assert note == (
        f"distconv check-manifests: note: {fifo}: still waiting: a writer has it open and "
        "has written nothing yet (one that holds it both ways, as exec 3<>FIFO does, never "
        "ends it)\n"
    )
    assert (check.returncode, err) == (1, b"")
    assert out.decode().splitlines()[0] == _CM_PROBLEM.format(fifo)


def test_a_fifo_a_silent_writer_holds_past_the_wait_is_noted_once(tmp_path, monkeypatch, capsys):
    """One note, however long the writer is silent past the wait: the FIFO is then read as
    stdin is (blocking), not looked at again and again."""
    monkeypatch.setattr(check_command, "FIFO_WAIT_S", 0.1)
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)
    os.close(keep)

    def write_late() -> None:
        time.sleep(0.6)  # six times the wait, the writer open all along
        os.write(writer, _CM)
        os.close(writer)

    late = threading.Thread(target=write_late, daemon=True)
    late.start()
    try:
        sources = check_command.read_sources([fifo])
    finally:
        late.join(5)
    assert [place for place, _ in sources] == [f"{fifo}:1"]
    assert capsys.readouterr().err.count("still waiting") == 1


#: a ConfigMap cut short, as the part of ``_CM`` one of two readers of a FIFO gets
_CUT = _CM[:46]


def _cut_error(name: str) -> str:
    """The one error :func:`check_command.read_sources` gives for the cut text at ``name``."""
    with pytest.raises(check_command.ManifestReadError) as refused:
        check_command.read_sources([name])
    return str(refused.value)


def test_a_fifo_whose_text_cannot_be_read_names_another_reader_as_a_possibility(tmp_path):
    """Two readers of one FIFO each get part of what is written: the check's part may be cut
    anywhere. Its YAML error said only where the text broke; it names that possibility now
    (the other reader is not looked for: a holder is not a reader)."""
    fifo, keep = _written_fifo(tmp_path, _CUT)
    try:
        error = _cut_error(fifo)
    finally:
        os.close(keep)
    assert error.startswith(f"{fifo}: line ")
    assert error.endswith(
        " (a FIFO: another process that reads it too takes some or all of what is written)"
    )


@pytest.mark.parametrize("kind", ["pipe", "file"])
def test_a_pipe_or_file_whose_text_cannot_be_read_names_no_other_reader(tmp_path, kind):
    """A pipe (``<(render)``), which no process can open by name, and a file keep the error
    as it was: their text was cut by no other reader."""
    if kind == "file":
        (tmp_path / "cm.yaml").write_bytes(_CUT)
        assert "another process" not in _cut_error(str(tmp_path / "cm.yaml"))
        return
    read, write = os.pipe()
    os.write(write, _CUT)
    os.close(write)
    try:
        assert "another process" not in _cut_error(f"/dev/fd/{read}")
    finally:
        os.close(read)


def test_a_fifo_that_gave_nothing_names_another_reader_as_a_possibility(tmp_path):
    """A FIFO whose whole text another reader took gives the check nothing: its "no manifests"
    named only the FIFO, as for an empty file. It names that possibility now; an empty file
    keeps the line as it was."""
    fifo = tmp_path / "rendered.yaml"
    os.mkfifo(fifo)
    writer = _write_when_read(fifo, "", 0.3, 10)  # opens once the check reads, writes nothing
    status, out, err = _check_waiting(fifo)
    writer.join(5)
    assert (status, out) == (2, "")
    assert err == f"{check_command.PROG}: error: no manifests in {fifo}{fifo_readers.SHARED}\n"
    (tmp_path / "empty.yaml").write_bytes(b"")
    assert _cut_error(str(tmp_path / "empty.yaml")) == f"no manifests in {tmp_path}/empty.yaml"


@pytest.mark.parametrize("recursive", [False, True])
def test_a_fifo_in_a_folder_given_that_gave_nothing_names_another_reader_too(tmp_path, recursive):
    """The hint looked at the paths given, not the files read: a FIFO in a folder given (with
    or without -r) that gave nothing was said as an empty file was."""
    folder = tmp_path / "rendered"
    folder.mkdir()
    os.mkfifo(folder / "job.yaml")
    writer = _write_when_read(folder / "job.yaml", "", 0.1, 10)
    with pytest.raises(check_command.ManifestReadError) as refused:
        check_command.read_sources([str(folder)], recursive)
    writer.join(5)
    assert str(refused.value).endswith(fifo_readers.SHARED), refused.value
    assert str(refused.value).startswith(f"no manifests in {folder}")
