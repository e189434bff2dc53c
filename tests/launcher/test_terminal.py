""":class:`launcher.terminal.Terminal` on real pipes: a pipe nobody reads never holds
up :meth:`~launcher.terminal.Terminal.put`; what did not fit is dropped whole, counted and
said once the output moves, each child's lines in order; a reader that is gone ends the view."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from launcher.child_spec import ChildSpec
from launcher.output_waits import WRITE_PIECE
from launcher.supervisor import Supervisor
from launcher.terminal import Terminal
from tests.launcher.real_children import wait_until

BOUND = 256 * 1024  # a small queue: the pipe's 64 KiB and it fill in a few thousand lines


def _notice(message: str) -> bytes:
    """The launcher's message as a JSON line, as under ``--log-format json``."""
    return json.dumps({"source": "launcher", "message": message}).encode() + b"\n"


@contextmanager
def _pipe() -> Iterator[tuple[int, object]]:
    """A real pipe: its read end's descriptor and its write end as a binary file."""
    read, write = os.pipe()
    out = os.fdopen(write, "wb")
    try:
        yield read, out
    finally:
        os.close(read)  # first: a write still under way ends (EPIPE), and so may the close
        with contextlib.suppress(OSError):  # what a stalled write left: the reader is gone
            out.close()


def _read_all(fd: int, into: list[bytes]) -> threading.Thread:
    """A thread that reads ``fd`` till its end into ``into``."""

    def run() -> None:
        while chunk := os.read(fd, 65536):
            into.append(chunk)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    return reader


@pytest.mark.timeout(30)
def test_a_stalled_pipe_drops_whole_lines_and_says_so_in_order(tmp_path: Path):
    logs = {name: tmp_path / f"{name}.log" for name in ("worker-0", "worker-1")}
    with _pipe() as (read, out):
        view = Terminal(out, _notice, bound=BOUND)
        for i in range(3000):  # unread: every put returns at once, dropped or not
            for name, log in logs.items():
                line = json.dumps({"source": name, "i": i, "pad": "x" * 80}).encode() + b"\n"
                assert view.put(name, log, line)
        got: list[bytes] = []
        reader = _read_all(read, got)  # the output moves again
        wait_until(lambda: view.pending() == 0, "the queue written")
        for name, log in logs.items():  # the next line of each says its gap first
            assert view.put(name, log, json.dumps({"source": name, "i": 3000}).encode() + b"\n")
        assert view.close(10) is None
        out.close()
        reader.join(10)
    entries = [json.loads(line) for line in b"".join(got).splitlines()]  # every line whole
    for name, log in logs.items():
        shown = [e["i"] for e in entries if e.get("source") == name]
        assert shown == sorted(shown) and shown[-1] == 3000 and len(shown) < 3001
        said = [e["message"] for e in entries if e["source"] == "launcher" and name in e["message"]]
        assert said == [
            f"{3001 - len(shown)} line(s) of {name} not shown: the launcher's output was "
            f"stalled (nothing read it); '{log}' has them all"
        ]
        place = entries.index({"source": "launcher", "message": said[0]})
        assert entries[place + 1] == {"source": name, "i": 3000}  # just before its next line


@pytest.mark.timeout(30)
def test_a_pipe_stalled_at_the_end_is_given_up_naming_what_it_lacks(tmp_path: Path):
    with _pipe() as (_read, out):
        view = Terminal(out, _notice, bound=BOUND)
        for i in range(5000):
            view.put("worker-0", tmp_path / "w.log", b"%08d %s\n" % (i, b"x" * 90))
        said = view.close(0.2)
    assert said is not None and said.startswith(
        "the launcher's output did not take its last lines within 0.2 s (nothing reads it, or "
        "too slowly), so it lacks "
    ), said
    assert said.endswith(f" line(s) of worker-0 ('{tmp_path / 'w.log'}'): their logs have them")


@pytest.mark.timeout(30)
def test_an_epipe_makes_put_answer_false(tmp_path: Path):
    read, write = os.pipe()
    os.close(read)  # the reader has gone (``| head``): writes fail with EPIPE
    out = os.fdopen(write, "wb")
    try:
        view = Terminal(out, _notice)
        answers = [view.put("worker-0", tmp_path / "w.log", b"line\n") for _ in range(1000)]
        view.close(5)
        assert view.put("worker-0", tmp_path / "w.log", b"line\n") is False
    finally:
        with contextlib.suppress(OSError):  # what the failed write left in the buffer
            out.close()
    assert answers[0] is True  # queued before the write found the reader gone


@pytest.mark.timeout(30)
def test_the_end_counts_the_dropped_lines_among_those_the_output_lacks(tmp_path: Path):
    """The end named only the lines still queued: the ones dropped before, whose notice was
    queued (unwritten) at the end, were missing from the count, most of what the output lacked.
    """
    total = 10000
    with _pipe() as (_read, out):
        capacity = fcntl.fcntl(out.fileno(), fcntl.F_GETPIPE_SZ)  # what the output took at most
        view = Terminal(out, _notice, bound=BOUND)
        for i in range(total):  # unread: the pipe, the queue, then drops
            view.put("worker-0", tmp_path / "w.log", b"%08d %s\n" % (i, b"x" * 90))
        said = view.close(0.2)
    assert said is not None
    lacks = int(re.search(r"so it lacks (\d+) line\(s\) of worker-0 ", said)[1])
    assert total - capacity // 99 <= lacks <= total, lacks


@pytest.mark.timeout(30)
def test_an_output_that_moves_slowly_loses_no_line(tmp_path: Path):
    """An output read at about 20 KB/s (a terminal over a slow link): the writer took a stall
    for a write of a whole 64 KiB batch (or a long line) that outlasted 1 s, though the output
    moved all along, and dropped lines, saying nothing read it. A stall is now a piece's
    write that does not end."""
    lines = [b"%08d %s\n" % (i, b"x" * 90) for i in range(650)]  # 64 KB: the queue's twice
    with _pipe() as (read, out):
        fcntl.fcntl(out.fileno(), fcntl.F_SETPIPE_SZ, 4096)  # the pipe holds a piece at most
        got: list[bytes] = []

        def slowly() -> None:
            while chunk := os.read(read, 2048):
                got.append(chunk)
                time.sleep(0.1)

        reader = threading.Thread(target=slowly, daemon=True)
        reader.start()
        view = Terminal(out, _notice, bound=32 * 1024)  # a batch of 32 KB: 1.6 s to write
        for line in lines:
            assert view.put("worker-0", tmp_path / "w.log", line)
        assert view.close(20) is None
        out.close()
        reader.join(10)
    assert b"".join(got) == b"".join(lines)


@pytest.mark.timeout(30)
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_stdout_on_a_full_disk_is_said(tmp_path: Path):
    """``distconv-launch ... > out.txt`` on a full disk: the view ended as at EPIPE, silently,
    the job ran on and exited 0 with nothing on stderr to say why out.txt stopped short. It is
    said at once, naming the logs that have the lines."""
    spec = ChildSpec("worker", 0, [sys.executable, "-c", "print('a line')"])
    with open("/dev/full", "wb", buffering=0) as out, (tmp_path / "err").open("wb") as err:
        status = Supervisor(tmp_path / "run", grace=2, out=out, err=err).run(lambda _r: [spec])
    said = (tmp_path / "err").read_text()
    assert status == 0, said
    logs = tmp_path / "run" / "logs"
    assert (
        "distconv-launch: cannot write the launcher's output: no space left on device; the "
        f"children's lines from now on are in their logs alone ('{logs}')\n"
    ) in said, said


class _Writes(io.BytesIO):
    """An output that keeps each write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.writes.append(bytes(data))
        return super().write(data)


@pytest.mark.timeout(30)
def test_each_write_is_whole_lines_or_a_long_lines_piece(tmp_path: Path):
    """The writer writes a piece at a time (its progress), each whole lines: a short line cut
    across two writes could take a launcher message (stderr on the same file, ``2>&1``) inside
    it, as a JSON line under ``--log-format json``."""
    out = _Writes()
    view = Terminal(out, _notice)
    lines = [b"%06d %s\n" % (i, b"x" * (i % 300)) for i in range(3000)]
    long = b"y" * (3 * WRITE_PIECE + 5) + b"\n"
    for line in [*lines[:1500], long, *lines[1500:]]:
        assert view.put("worker-0", tmp_path / "w.log", line)
    assert view.close(10) is None
    assert out.getvalue() == b"".join([*lines[:1500], long, *lines[1500:]])
    cut = [w for w in out.writes if not w.endswith(b"\n") and not set(w) == {ord("y")}]
    assert cut == [] and all(len(w) <= WRITE_PIECE for w in out.writes)
