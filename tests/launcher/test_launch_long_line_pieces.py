"""A child's line over :data:`launcher.child.READ_PIECE` is read and passed on a piece at a time:
the pump read each line whole (``readline()``) and copied it behind the prefix, so a rank
printing one 2 GB line without a newline made the launcher hold about twice that. Each piece
goes to the log as it comes (the line whole there), and to the launcher's output as a line of
its own under the output's lock for that piece alone, the later pieces behind
:func:`~launcher.child.continued_prefix`: a child stopped in the middle of its line holds up no
other child's output. The tail keeps the line's :func:`~launcher.kept_line.kept_line`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_supervision import ENV, launch_argv

from launcher.child import READ_PIECE, Child, ChildSpec, continued_prefix
from launcher.kept_line import KEPT_LINE_BYTES, KeptEnds, kept_line
from tests.launcher.attempt_logs import logged
from tests.launcher.real_children import wait_until
from tests.processes import job_env

#: the long line: 67 writes of 1,000,003 bytes (pieces straddle them), each of its own letter,
#: so a piece out of place shows; about 64 MiB
WRITES, WRITE = 67, 1_000_003
#: rank 0 prints the long line without a newline and exits 3 once rank 1 is done; rank 1
#: prints 50 short lines meanwhile
WORKER = f"""if True:
    import os, sys, time
    if os.environ["RANK"] == "1":
        for n in range(50):
            print("line", n, flush=True)
        open("rank1-done", "w").close()
        sys.exit(0)
    for n in range({WRITES}):
        os.write(1, bytes([97 + n % 26]) * {WRITE})
    deadline = time.monotonic() + 20
    while not os.path.exists("rank1-done") and time.monotonic() < deadline:
        time.sleep(0.01)
    sys.exit(3)
"""
#: runs the launcher and prints the largest resident set of it and its children: the workers
#: write from 1 MB buffers, and the launcher itself takes about 30 MB before any line
MEASURE = """if True:
    import resource, subprocess, sys
    subprocess.run(sys.argv[1:], stdout=open("out", "wb"), stderr=subprocess.DEVNULL, check=False)
    print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _long_line() -> bytes:
    return b"".join(bytes([97 + n % 26]) * WRITE for n in range(WRITES))


def _joined(lines: list[bytes], prefix: bytes) -> list[bytes]:
    """The lines behind ``prefix`` on the launcher's output, each continued piece joined to
    the line it continues."""
    joined: list[list[bytes]] = []
    for line in lines:
        if line.startswith(prefix):
            joined.append([line[len(prefix) :]])
        elif line.startswith(continued_prefix(prefix, "worker")):
            joined[-1].append(line[len(continued_prefix(prefix, "worker")) :])
    return [b"".join(pieces) for pieces in joined]


@pytest.mark.timeout(60)
def test_a_64_mib_line_is_never_held_whole_and_is_whole_in_the_log_and_report(tmp_path):
    run_dir = tmp_path / "run"
    argv = launch_argv(run_dir, "--workers", "2", "--servers", "0", "--")
    with job_env(ENV) as env:
        done = subprocess.run(
            [sys.executable, "-c", MEASURE, *argv, sys.executable, "-c", WORKER],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            timeout=50,
        )
    peak = int(done.stdout) * 1024  # ru_maxrss: KiB on Linux
    line = _long_line()
    assert peak < len(line) * 3 // 4, peak  # 28 MB; before: 160 MB (the line, twice, and more)
    assert logged(run_dir / "logs" / "worker-0.log") == line + b"\n"
    lines = (tmp_path / "out").read_bytes().splitlines()
    assert _joined(lines, b"[worker 0] ") == [line]
    assert sum(line.startswith(b"[worker 0]+ ") for line in lines) == len(line) // READ_PIECE
    assert _joined(lines, b"[worker 1] ") == [f"line {n}".encode() for n in range(50)]
    report = json.loads((run_dir / "failure.json").read_text())
    assert (report["rank"], report["exit_code"]) == (0, 3)
    half = KEPT_LINE_BYTES // 2
    mark = f"[... {len(line) - KEPT_LINE_BYTES} bytes cut ...]"
    assert report["tail"] == [line[:half].decode() + mark + line[-half:].decode()]


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.timeout(60)
def test_a_child_stopped_inside_a_long_line_holds_up_no_other_childs_output(tmp_path):
    stopper = (  # a piece and a half of its line, then stopped inside it
        "import os, signal\n"
        f"os.write(1, b'a' * {READ_PIECE * 3 // 2})\n"
        "os.kill(os.getpid(), signal.SIGSTOP)\n"
        "os.write(1, b'b' * 10 + b'\\n')\n"
    )
    chatty = "for n in range(20):\n    print('line', n, flush=True)\n"
    lock = threading.Lock()
    with open(tmp_path / "out", "wb") as out:
        spec = ChildSpec("worker", 0, [sys.executable, "-c", stopper])
        first = Child(spec, tmp_path / "w0.log", out, lock)
        try:
            wait_until(lambda: _stopped(first.proc.pid), "the first child did not stop")
            wait_until(lambda: (tmp_path / "out").stat().st_size > READ_PIECE, "no first piece")
            spec = ChildSpec("worker", 1, [sys.executable, "-c", chatty])
            second = Child(spec, tmp_path / "w1.log", out, lock)
            wait_until(lambda: second.poll() is not None, "the second child did not exit")
            second.finish()  # its output drained: its pump was not held up by the first's
            meanwhile = (tmp_path / "out").read_bytes().splitlines()
        finally:  # the first goes on, and ends
            os.kill(first.proc.pid, signal.SIGCONT)
            wait_until(lambda: first.poll() is not None, "the first child did not exit")
            first.finish()
    assert _joined(meanwhile, b"[worker 1] ") == [f"line {n}".encode() for n in range(20)]
    lines = (tmp_path / "out").read_bytes().splitlines()
    assert lines[0] == b"[worker 0] " + b"a" * READ_PIECE
    assert lines[-1] == b"[worker 0]+ " + b"a" * (READ_PIECE // 2) + b"b" * 10
    assert _joined(lines, b"[worker 0] ") == [b"a" * (READ_PIECE * 3 // 2) + b"b" * 10]
    assert (tmp_path / "w0.log").read_bytes() == b"a" * (READ_PIECE * 3 // 2) + b"b" * 10 + b"\n"
    assert list(first.tail) == [kept_line(b"a" * (READ_PIECE * 3 // 2) + b"b" * 10)]


@pytest.mark.timeout(60)
def test_under_json_lines_a_long_line_is_one_json_object_of_its_kept_form(tmp_path):
    printer = f"import os\nos.write(1, b'q' * {3 * READ_PIECE} + b'\\n')\n"
    rendered: list[bytes] = []

    def render(line: bytes) -> bytes:
        rendered.append(line)
        return json.dumps({"message": line.decode().rstrip("\n")}).encode() + b"\n"

    spec = ChildSpec("worker", 0, [sys.executable, "-c", printer])
    with open(tmp_path / "out", "wb") as out:
        child = Child(spec, tmp_path / "w.log", out, threading.Lock(), render)
        wait_until(lambda: child.poll() is not None, "the child did not exit")
        child.finish()
    kept = kept_line(b"q" * (3 * READ_PIECE))
    assert rendered == [kept.encode() + b"\n"]
    assert json.loads((tmp_path / "out").read_bytes()) == {"message": kept}
    assert (tmp_path / "w.log").read_bytes() == b"q" * (3 * READ_PIECE) + b"\n"


#: lines over :data:`KEPT_LINE_BYTES` with escapes (``\\u00e9``, ``\\"``, a surrogate pair,
#: backslash runs, one of them longer than what KeptEnds keeps around the cut) at both cuts
ESCAPED = [
    *((b"x" * shift + b'\\u00e9\\"\\\\\\ud83d\\ude00' * 3500)[:70_001] for shift in range(8)),
    *(b"x" * 40_000 + b"\\" * (30_000 + odd) + b"u00e9" + b"y" * 32_760 for odd in (0, 1)),
]


@pytest.mark.parametrize("line", ESCAPED, ids=range(len(ESCAPED)))
def test_kept_ends_keeps_what_kept_line_keeps_of_the_whole_line(line):
    """Fed in pieces of any size, the kept form is the whole line's, cuts moved off escapes
    alike."""
    line += b"\n"
    for piece in (997, 4096, 70_001, len(line)):
        ends = KeptEnds()
        for at in range(0, len(line), piece):
            ends.add(line[at : at + piece])
        assert ends.text() == kept_line(line), piece


def test_continued_prefix_marks_the_prefix_before_its_space():
    assert continued_prefix(b"[worker 0] ", "worker") == b"[worker 0]+ "
    assert continued_prefix(b"", "mpiexec") == b"[mpiexec]+ "
    assert continued_prefix(b"[ps 1]", "ps") == b"[ps 1]+ "


def test_the_docs_say_how_a_long_line_appears():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    assert "[worker 0]+ " in docs
