"""The keeper of a child's output (:mod:`launcher.output_keeper`), with real processes: a
stand-in launcher starts it on a real pipe, and a writer outlives the launcher."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.output_keeper import TAKEN_OVER
from tests.launcher.launch_cli import ENV
from tests.processes import job_env, job_left

#: a child writing LINES lines into its stdout once ``GO`` exists, then ``written`` on its
#: stderr: a reader gone, it would die of the broken pipe before that
WRITER = """import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
for i in range(int(sys.argv[2])):
    print(f"line {i} " + "x" * 60)
sys.stdout.flush()
sys.stderr.write("written\\n")
"""
#: a launcher's stand-in: starts the keeper of a pipe into LOG and the writer on that pipe, says
#: the keeper's pid; then, told ``read``, waits for the writer to end (what it wrote waits in
#: the pipe, the keeper running beside it), reads the pipe to its end into READ and reaps the
#: keeper (printing its status); told ``wait``, waits for the writer to end and a second more
#: and says ``ended``, then, as told ``hold``, holds the pipe unread until killed
LAUNCHER = """import os, subprocess, sys, time
from pathlib import Path
from launcher.output_keeper import reap_keeper, start_keeper
log, go, errors, how, read_into, lines = sys.argv[1:7]
read, write = os.pipe()
keeper = start_keeper(read, Path(log))
writer = subprocess.Popen(
    [sys.executable, "-c", WRITER, go, lines], stdout=write, stderr=open(errors, "w")
)
os.close(write)
print(keeper.pid, flush=True)
if how == "read":
    writer.wait()
    with open(read, "rb") as pipe:
        Path(read_into).write_bytes(pipe.read())
    reap_keeper(keeper, 5)
    print(keeper.returncode, flush=True)
else:
    if how == "wait":
        writer.wait()
        time.sleep(1)  # the keeper has seen the pipe's end
        print("ended", flush=True)
    time.sleep(120)
"""


def stand_in(tmp_path: Path, env: dict[str, str], how: str, lines: int) -> subprocess.Popen[str]:
    """The stand-in launcher, started (``how``: ``read``, ``wait`` or ``hold``; its writer
    writing ``lines`` lines), its stdout a pipe."""
    if not (tmp_path / "child.log").is_symlink():  # a test's full disk (/dev/full) is left
        (tmp_path / "child.log").touch()  # the launcher's own: the keeper appends, never creates
    script = f"WRITER = {WRITER!r}\n{LAUNCHER}"
    log, go, errors, read = (str(tmp_path / name) for name in ("child.log", "go", "errors", "read"))
    argv = [sys.executable, "-c", script, log, go, errors, how, read, str(lines)]
    return subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)


def written_lines(lines: int) -> str:
    """What :data:`WRITER` writes, told ``lines``."""
    return "".join(f"line {i} " + "x" * 60 + "\n" for i in range(lines))


def kill_when(launcher: subprocess.Popen[str], *said: str) -> None:
    """Kill the stand-in ``launcher`` outright, as the OOM killer does, once it has said its
    keeper's pid and then the lines ``said``; killed all the same where it fails before."""
    try:
        assert launcher.stdout.readline().strip().isdigit()  # the keeper runs
        for line in said:
            assert launcher.stdout.readline() == line + "\n"
        launcher.kill()
        launcher.wait(10)
    finally:
        launcher.kill()
        launcher.stdout.close()


@pytest.mark.timeout(60)
def test_a_writer_outliving_the_launcher_meets_no_broken_pipe_and_its_lines_reach_the_log(
    tmp_path,
):
    with job_env(ENV) as env:
        kill_when(launcher := stand_in(tmp_path, env, "hold", 2000))  # over a pipe's 64 KiB
        (tmp_path / "go").touch()  # only now: every line comes after the launcher's death
        assert job_left(env, 30) == {}  # the writer done, the keeper at the pipe's end
    assert (tmp_path / "errors").read_text() == "written\n"
    said = (tmp_path / "child.log").read_text()
    assert said == TAKEN_OVER.format(pid=launcher.pid) + written_lines(2000)


@pytest.mark.timeout(60)
def test_while_the_launcher_reads_the_keeper_takes_nothing_and_ends_with_the_pipe(tmp_path):
    (tmp_path / "go").touch()
    with job_env(ENV) as env:
        launcher = stand_in(tmp_path, env, "read", 100)  # within the pipe's 64 KiB
        try:
            out, _ = launcher.communicate(timeout=30)
        finally:
            launcher.kill()
        assert job_left(env, 10) == {}
    keeper_status = out.split()[1]
    assert keeper_status == "0", out  # it ended by itself, reaped in time
    assert (tmp_path / "read").read_text() == written_lines(100)
    assert (tmp_path / "child.log").read_text() == ""


@pytest.mark.timeout(60)
def test_lines_still_unread_at_the_pipes_end_reach_the_log_once_the_launcher_dies(tmp_path):
    """``mpiexec``'s last lines, written as it exits: the launcher, killed before its pump read
    them, leaves them to the keeper, which had seen the pipe's end already and used to end
    then, losing them (as it did where the launcher died first, within one of its looks)."""
    (tmp_path / "go").touch()
    with job_env(ENV) as env:
        launcher = stand_in(tmp_path, env, "wait", 100)  # within the pipe's 64 KiB
        kill_when(launcher, "ended")  # every writer gone, nothing read
        assert job_left(env, 30) == {}
    said = (tmp_path / "child.log").read_text()
    assert said == TAKEN_OVER.format(pid=launcher.pid) + written_lines(100)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("log", ["full", "gone"])
def test_a_keeper_that_cannot_write_the_log_still_reads_the_pipe_to_its_end(tmp_path, log):
    """A full disk (``/dev/full``: every write fails with ENOSPC) or a log removed meanwhile:
    the lines are lost, but the writer must not block on a full pipe for ever (nor die of a
    broken one), or the ranks would hang in their next print."""
    if log == "full":
        if not os.access("/dev/full", os.W_OK):
            pytest.skip("no writable /dev/full")
        (tmp_path / "child.log").symlink_to("/dev/full")
    with job_env(ENV) as env:
        kill_when(stand_in(tmp_path, env, "hold", 2000))  # over a pipe's 64 KiB
        if log == "gone":
            (tmp_path / "child.log").unlink()
        (tmp_path / "go").touch()
        assert job_left(env, 30) == {}  # the writer done, the keeper at the pipe's end
    assert (tmp_path / "errors").read_text() == "written\n"
