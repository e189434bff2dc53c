"""A child's last words, printed without a newline as it dies while a process that left its
group (setsid, a daemon) still holds its pipe: the launcher stops waiting for the pipe's end,
and its pump used to sit in ``readline`` with those bytes read and held until a newline that
never came. They were in neither the report's tail, nor the log, nor the launcher's output.
The pump now reads what has come (:class:`launcher.long_line.OutputPipe`), and is told to pass
on the line under way, ended, when the launcher gives up on the pipe."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import threading
import time

import pytest
from test_supervision import launch_argv

import launcher.child
from launcher.child import Child, ChildSpec, LaunchError
from launcher.long_line import READ_PIECE, OutputPipe
from tests.launcher.attempt_logs import logged
from tests.launcher.launch_cli import ENV, launcher_command
from tests.launcher.real_children import stray_holding_the_pipe
from tests.processes import run_job

#: a stray leaves the group holding the pipe; then the child prints a line and its last words
#: without a newline, and dies
CHILD = stray_holding_the_pipe('os.write(1, b"step 1 ok\\nfatal: boom")')


@pytest.mark.timeout(30)
def test_a_childs_last_words_are_in_the_report_log_and_output_though_a_stray_holds_its_pipe(
    tmp_path,
):
    run_dir, pid_file = tmp_path / "run", tmp_path / "stray.pid"
    argv = launch_argv(run_dir, "--workers", "1", "--servers", "0", "--")[3:]
    command = [*launcher_command(OUTPUT_DRAIN_SECONDS=0.5), *argv]
    try:
        done = run_job([*command, sys.executable, "-c", CHILD, str(pid_file)], ENV, timeout=20)
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert done.returncode == 3, done.stderr
    assert "still holds its output" in done.stderr
    # its pipe is not waited for again at the launcher's end, nor said a second time
    assert "was not drained within" not in done.stderr, done.stderr
    report = json.loads((run_dir / "failure.json").read_text())
    assert report["tail"][-2:] == ["step 1 ok", "fatal: boom"]
    log = logged(run_dir / "logs" / "worker-0.log")
    assert log == b"step 1 ok\nfatal: boom\n"  # the newline the launcher gives, as at the end
    assert "[worker 0] step 1 ok\n[worker 0] fatal: boom\n" in done.stdout


def _pieces(chunks: list[bytes], end_line: bool = False) -> list[bytes]:
    """What :meth:`OutputPipe.pieces` gives of ``chunks`` written to a pipe; ``end_line``:
    asked to end the line once all is written (what the pipe has comes first), then the pipe
    closed."""
    read_end, write_end = os.pipe()
    output = OutputPipe(read_end)
    got: list[bytes] = []
    thread = threading.Thread(target=lambda: got.extend(output.pieces()), daemon=True)
    thread.start()
    try:
        for chunk in chunks:
            os.write(write_end, chunk)
        if end_line:
            assert output.end_line(10)
    finally:
        os.close(write_end)
        thread.join(10)
        os.close(read_end)
        output.close()
    assert not thread.is_alive()
    return got


def _readline_pieces(data: bytes) -> list[bytes]:
    """What ``readline(READ_PIECE)`` gave of ``data``, the pump's reads before."""
    pieces, at = [], 0
    while at < len(data):
        end = data.find(b"\n", at, at + READ_PIECE)
        end = min(at + READ_PIECE, len(data)) if end < 0 else end + 1
        pieces.append(data[at:end])
        at = end
    return pieces


CASES = {
    "short lines": [b"a\nbb\n", b"ccc\n\n"],
    "a line across reads": [b"ab", b"cd", b"e\nf", b"g\n"],
    "no newline at the end": [b"x\ny"],
    "a piece less a byte": [b"a" * (READ_PIECE - 1) + b"\nb\n"],
    "a piece": [b"a" * READ_PIECE + b"\nb\n"],
    "two pieces and a bit, in reads": [b"a" * 70000] * 30 + [b"bc\nd"],
    "a long line's end across reads": [b"a" * (READ_PIECE - 3), b"bcdef", b"g\nh\n"],
    "a long line without its end": [b"a" * (2 * READ_PIECE + 5)],
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("chunks", CASES.values(), ids=CASES.keys())
def test_the_pipe_gives_what_readline_gave(chunks):
    assert _pieces(chunks) == _readline_pieces(b"".join(chunks))


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("chunks", "ended"),
    [
        ([b"ok\nfatal: boom"], [b"ok\n", b"fatal: boom\n"]),  # the line, ended
        ([b"ok\n"], [b"ok\n"]),  # none under way: no empty line
        ([b"a" * READ_PIECE], [b"a" * READ_PIECE, b"\n"]),  # its pieces given: a bare newline
        ([b"a" * READ_PIECE + b"cc"], [b"a" * READ_PIECE, b"cc\n"]),  # the bytes after them
    ],
    ids=["short", "none", "after a piece", "a piece and a bit"],
)
def test_end_line_passes_on_the_line_under_way(chunks, ended):
    assert _pieces(chunks, end_line=True) == ended


@pytest.mark.timeout(30)
def test_a_child_whose_output_pipe_cannot_be_made_is_named_and_not_left_running(
    tmp_path, monkeypatch
):
    """The pump's wake-up is a pipe of its own, made once the child has started: where no
    descriptor is left for it, the child is killed and reaped, and the error names it."""
    pid_file = tmp_path / "pid"
    started = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(30)"

    def no_descriptor(fd: int) -> OutputPipe:
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the child did not start"
            time.sleep(0.01)
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(launcher.child, "OutputPipe", no_descriptor)
    spec = ChildSpec("worker", 0, [sys.executable, "-c", started, str(pid_file)])
    with open(tmp_path / "out", "wb") as out:
        with pytest.raises(LaunchError, match="^cannot start worker-0: too many open files$"):
            Child(spec, tmp_path / "w.log", out, threading.Lock())
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid_file.read_text()), 0)
