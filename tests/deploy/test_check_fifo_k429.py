"""``distconv check-manifests``: review k424's proposed simpler design for a FIFO named as a
file. Other processes are no longer looked at (``/proc`` shows who holds a FIFO, not who
reads it): each case the look refused is read, and a reader elsewhere is named as a
possibility where the wait for a writer ends. Each test failed before the change."""

from __future__ import annotations

import array
import fcntl
import os
import subprocess
import sys
import termios
import threading
import time

import pytest

from distconv.deploy import check_command
from tests.child_env import child_env
from tests.deploy.test_check_fifo_k419 import _CHECK, _CM, _written_fifo
from tests.deploy.test_check_manifests_review390 import _check_waiting

pytestmark = pytest.mark.timeout(30)

#: the line the check prints for the ConfigMap ``_CM`` read from FIFO ``{}``
_CM_PROBLEM = "{}:1: ConfigMap x: label app.kubernetes.io/name is missing"
#: a child that holds what it inherited and reads nothing (a shell's ``sleep 5 &``)
_IDLE = "import time; time.sleep(60)"


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
    fifo = str(tmp_path / "cm.yaml")
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)
    os.write(writer, _CUT)
    os.close(writer)
    try:
        error = _cut_error(fifo)
    finally:
        os.close(keep)
    assert error.startswith(f"{fifo}: line ")
    assert error.endswith(
        " (a FIFO: another process that reads it too takes part of what is written)"
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
