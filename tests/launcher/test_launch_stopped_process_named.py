"""A process of a job stopped (SIGSTOP) is what ``distconv-launch`` blames, by its pid, where a
program of one's own gives its sync ``timeout=1``, and a healthy worker gives up first.

Such a program's workers wait 1.5 s for a shard's answer, the shards their own 60 s for every
worker (the launcher passes ``--timeout`` to ``distconv train``'s shards alone). One worker
stopped, the shard holds the step for it and the healthy worker gives up on the shard first
(exit 1, ``rank 0: no answer to step N from pserver shard(s) 0 ... within 1.5 s``), the only
child that ends by itself; one shard stopped, the same. The launcher reported ``worker 0 failed
with exit code 1``, the stopped process named nowhere: its stop's SIGCONT let it run to its
SIGTERM, and nothing said that it had been stopped. The stop now reads each process's state
first (``/proc/PID/stat``: ``T``), and the report blames the one it found stopped."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.stopped_processes import stopped_headline, stopped_in_groups, stopped_way_out
from tests.launcher.gave_up_line import GAVE_UP
from tests.launcher.stopped_child import launch_marked, launch_stopping

#: the program of one's own: two workers with ``timeout=1`` on their sync, one shard
PROGRAM = Path(__file__).with_name("own_program_timeout.py")
GANG = ("--workers", "2", "--servers", "1")
JOB = (*GANG, "--", str(PROGRAM), "train")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("role", "rank"), [("worker", 1), ("server", 0)])
def test_the_stopped_process_is_blamed_not_the_worker_that_gave_up(tmp_path, role, rank):
    ended = launch_stopping(tmp_path, role, rank, *JOB, timeout=60)
    report, output = ended.report, ended.output[-3000:]
    assert report is not None, output
    assert (report["role"], report["rank"]) == (role, rank), output
    # a stopped shard: each worker that gave up on it by then (both, but for one the stop
    # reached first); a stopped worker: the other one
    who = r"worker \d(, worker \d)?" if role == "server" else "worker 0"
    gave_up = rf"{who} gave up waiting: rank \d: no answer to step \d+ "
    assert re.match(gave_up, report["cause"]), report["cause"]
    assert "from pserver shard(s) 0 (127.0.0.1:" in report["cause"], report["cause"]
    headline = (
        f"distconv-launch: {role} {rank}'s process (pid {ended.pid}) was stopped (SIGSTOP), not "
        f"crashed: {report['cause']}; {stopped_way_out('SIGSTOP')} (after 0 restart(s))"
    )
    assert headline in ended.output, output
    assert ended.status == 1, output  # the launcher's stop ended it: no status of its own


@pytest.mark.timeout(30)
def test_a_stopped_process_is_found_by_its_group_and_no_longer_once_continued():
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    child = subprocess.Popen(sleep, start_new_session=True)
    # a group that runs, of its own: the tests' group may hold another test's stopped child
    runner = subprocess.Popen(sleep, start_new_session=True)
    try:
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not (found := stopped_in_groups({child.pid})) and time.monotonic() < deadline:
            time.sleep(0.01)  # the stop is the kernel's to deliver
        assert found[child.pid].pid == child.pid and found[child.pid].by == "SIGSTOP", found
        assert stopped_in_groups({runner.pid}) == {}  # a group whose process runs
        os.kill(child.pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while stopped_in_groups({child.pid}) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stopped_in_groups({child.pid}) == {}
    finally:
        for process in (child, runner):
            process.kill()
            process.wait()


#: a program of two ranks: rank 1 stops itself (SIGSTOP), its pid in ``MARK.<attempt>``; rank 0
#: then says the words given and exits 3 (no status the launcher's stop gives), on every attempt
SELF_STOPPING = """
import os, signal, sys, time
from pathlib import Path
mark = Path(f"{sys.argv[1]}.{os.environ['DISTCONV_RESTART']}")
if os.environ["RANK"] == "1":
    mark.write_text(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGSTOP)
    sys.exit(0)
while not mark.exists() or Path(f"/proc/{mark.read_text()}/stat").read_text().split()[2] != "T":
    time.sleep(0.01)
print(sys.argv[2], file=sys.stderr, flush=True)
sys.exit(3)
"""
#: what the launcher says of a failure a restart follows, the job given ``--max-restarts 1``
RESTARTING = "; restarting the job (1 of 1)"


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("last_words", "blamed"),
    [(f"SyncError: {GAVE_UP}", 1), ("ValueError: a label of 7", 0)],
    ids=["gave-up", "own-error"],
)
def test_only_a_wait_given_up_is_laid_on_the_stopped_process(tmp_path, last_words, blamed):
    """Rank 0 ends while rank 1 is stopped, on each of two attempts: on a wait given up, rank 1
    is blamed; on an error of its own, rank 0 is (a stopped peer is then no cause). The restart
    line, ``restarts.jsonl``, ``failure.json``, the headline and the exit status all say so:
    the stop's findings decide the attempt's failure, not only its final report."""
    done, mark, run = launch_marked(tmp_path, SELF_STOPPING, 2, last_words, restarts=1, timeout=80)
    err = done.stderr[-4000:]
    record = [json.loads(line) for line in (run / "restarts.jsonl").read_text().splitlines()]
    report = json.loads((run / "failure.json").read_text())
    for entry in (*record, report):
        assert (entry["role"], entry["rank"]) == ("worker", blamed), err
    assert [entry["restart"] for entry in (*record, report)] == [0, 1], err
    for attempt, after in ((0, RESTARTING), (1, " (after 1 restart(s))")):
        pid = (tmp_path / f"stopped-pid.{attempt}").read_text()
        if blamed == 1:
            said = (
                f"distconv-launch: worker 1's process (pid {pid}) was stopped (SIGSTOP), not "
                f"crashed: worker 0 gave up waiting: {GAVE_UP}; {stopped_way_out('SIGSTOP')}"
            )
        else:
            said = "distconv-launch: worker 0 failed with exit code 3"
            assert f"(pid {pid}) was stopped" not in done.stderr, err
        assert f"{said}{after}" in done.stderr, err
    if blamed == 1:
        assert record[0]["cause"] == report["cause"] == f"worker 0 gave up waiting: {GAVE_UP}"
    # the stopped process's: the launcher's stop ended it (1); rank 0's own error: its 3
    assert done.returncode == (1 if blamed == 1 else 3), err


#: a program of three ranks: ranks 1 and 2 stop themselves (SIGSTOP), each its pid in
#: ``MARK.<rank>``; rank 0 then says the words given and exits 1
TWO_STOPPED = """
import os, signal, sys, time
from pathlib import Path
rank = os.environ["RANK"]
if rank != "0":
    Path(f"{sys.argv[1]}.{rank}").write_text(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGSTOP)
    sys.exit(0)
for mark in (Path(f"{sys.argv[1]}.{r}") for r in (1, 2)):
    while not mark.exists() or Path(f"/proc/{mark.read_text()}/stat").read_text().split()[2] != "T":
        time.sleep(0.01)
print(sys.argv[2], file=sys.stderr, flush=True)
sys.exit(1)
"""


@pytest.mark.timeout(60)
def test_a_wait_given_up_beside_several_stopped_names_each(tmp_path):
    """Two ranks stopped as rank 0 gives up waiting: neither is singled out (rank 0 is the
    failure reported, its own exit code), but the headline and ``failure.json`` say both,
    by pid (they said neither: a healthy rank blamed, nothing said of the stopped ones), and
    the headline the way out that it gives one stopped process (it gave none for several)."""
    done, mark, run = launch_marked(tmp_path, TWO_STOPPED, 3, GAVE_UP)
    err = done.stderr[-4000:]
    pids = [(tmp_path / f"stopped-pid.{rank}").read_text() for rank in (1, 2)]
    cause = (
        f"{GAVE_UP}; the launcher's stop found stopped worker 1's process (pid {pids[0]}, "
        f"SIGSTOP), worker 2's process (pid {pids[1]}, SIGSTOP), any of which may have held "
        "that wait up"
    )
    said = f"worker 0 failed with exit code 1: {cause}; {stopped_way_out('SIGSTOP')} (after"
    assert f"distconv-launch: {said}" in done.stderr, err
    report = json.loads((run / "failure.json").read_text())
    assert (report["role"], report["rank"], report["cause"]) == ("worker", 0, cause), report
    assert done.returncode == 1, err


#: a program of one's own that a restart saves: :data:`PROGRAM` on the job's first attempt, each
#: rank's exit 0 at once on a restart (``train``, unused, is how the test finds a worker)
FIRST_ATTEMPT_ONLY = f"""
import os, runpy, sys
if os.environ["DISTCONV_RESTART"] != "0":
    sys.exit(0)
runpy.run_path({str(PROGRAM)!r}, run_name="__main__")
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("role", "rank"), [("worker", 1), ("server", 0)])
def test_the_restart_line_and_record_name_the_stopped_process(tmp_path, role, rank):
    """A worker or a shard stopped (SIGSTOP) in a job given ``--max-restarts 1``: the line that
    says the job restarts and its ``restarts.jsonl`` line name that process, not the healthy
    worker that gave up first (they did only in the final report, which a restart that saves
    the job never writes)."""
    program = tmp_path / "first_attempt_only.py"
    program.write_text(FIRST_ATTEMPT_ONLY)
    job = ("--max-restarts", "1", *GANG, "--", str(program), "train")
    ended = launch_stopping(tmp_path, role, rank, *job, timeout=60)
    output = ended.output[-4000:]
    assert ended.status == 0, output  # the restart saved it
    (entry,) = [json.loads(line) for line in (tmp_path / "run/restarts.jsonl").open()]
    assert (entry["role"], entry["rank"], entry["restart"]) == (role, rank, 0), output
    assert entry["then"] == RESTARTING[2:], entry
    assert " gave up waiting: rank " in entry["cause"], entry["cause"]
    said = (
        f"distconv-launch: {role} {rank}'s process (pid {ended.pid}) was stopped (SIGSTOP), not "
        f"crashed: {entry['cause']}; {stopped_way_out('SIGSTOP')}"
    )
    (line,) = [line for line in ended.output.splitlines() if line.endswith(RESTARTING)]
    assert line.startswith(said), output
    assert "finished after 1 restart(s)" in ended.output, output


def test_the_docs_say_the_stopped_headline_in_the_launchers_words():
    """docs/operations.md's stopped headlines, and the wait given up laid on a stopped process,
    are what :mod:`launcher.stopped_processes` says, not a paraphrase (lines joined)."""
    docs = " ".join((Path(__file__).parents[2] / "docs" / "operations.md").read_text().split())
    debugger = stopped_headline("worker", 1, 4242, "a debugger").partition(" (pid 4242) ")[2]
    for said in (
        f"`{stopped_headline('worker', 1, 4242, 'SIGSTOP')}: rank 1 (host vm, last step 184) ",
        f"; {stopped_way_out('SIGSTOP')}` (",
        f"`... {debugger}: ...; {stopped_way_out('a debugger')}`",
        f"`{stopped_headline('server', 0, 4244, 'SIGSTOP')}: worker 0, worker 1 gave up on it: ",
        f"`{stopped_headline('worker', 1, 4243, 'SIGSTOP')}: worker 0 gave up waiting: rank 0: ",
    ):
        assert said in docs, said
