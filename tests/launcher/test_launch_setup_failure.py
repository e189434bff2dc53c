"""A rank that could not set up (``Trainer.fit`` failed before its sync's setup, ``fail_setup``
telling the others) is the failure that ``distconv-launch`` reports, named with its error, and
the job is restarted as on any rank's own error, unless every attempt would meet that
error again (here, resuming a directory that is not there: not restarted). The launcher read
no cause from ``rank 0 could not set up: ...`` (failure.json's ``cause`` null, the headline
naming no reason), and under ``local`` the told worker exited 1: where it exited first it was
blamed, and a shard's refusal that told it (``run different jobs: name: ... 'setup failed on rank 0
...'``) was read as the ranks' different jobs, never restarted. Real launches of
:data:`tests.setup_failures.FAILS_BEFORE_SETUP`: ``mpi -np 2`` (one ``mpiexec`` child) and
``local`` with two workers and a shard; and under ``mpi -np 2`` a transient one (the output
directory's lock held through the first attempt), which is restarted."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from distconv.rank_endings import setup_failure_text
from launcher.child import ChildSpec
from tests.held_lock import ASK_FOR_THE_LOCK, held_until_asked
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip
from tests.launcher.test_launch_peer_failed import EXITS_IN_ORDER as _ORDER
from tests.launcher.test_launch_peer_failed import _run
from tests.other_jobs import SMALL_NET
from tests.setup_failures import FAILS_BEFORE_SETUP, TOLD_OF_RANK_0

#: restarted once: a rank's own error, as the launcher restarts any (it tells none transient)
RESTARTING = "; restarting the job (1 of 1)"
#: not restarted: the error of :data:`FAILS_BEFORE_SETUP`, a resume of a directory that is not
#: there, which every attempt would meet again, as the launcher reads it from the told rank
NOT_RESTARTING = (
    "then not restarting (--max-restarts 1): the output directory holds no checkpoint to resume, "
    "which every attempt would refuse"
)


def _launched(
    tmp_path: Path, *how: str, mode: tuple[str, ...] = (), restarts: int = 1
) -> tuple[str, dict]:
    """``distconv-launch HOW --max-restarts RESTARTS -- FAILS_BEFORE_SETUP <none> MODE`` in
    ``tmp_path``: its stderr, and its failure.json; exit status 1 (rank 0's, not the told
    rank's)."""
    script = tmp_path / "fails.py"
    script.write_text(FAILS_BEFORE_SETUP)
    run = tmp_path / "run"
    argv = [*how, "--max-restarts", str(restarts), "--run-dir", str(run), "--", str(script)]
    done = launch(*argv, str(tmp_path / "none"), *mode, cwd=tmp_path, timeout=60)
    assert done.returncode == 1, done.stderr[-3000:]
    return done.stderr, json.loads((run / "failure.json").read_text())


def _told(tmp_path: Path) -> str:
    """Rank 0's error, as the ranks it told name it: the cause."""
    return f"{TOLD_OF_RANK_0} {tmp_path / 'none'}/checkpoints: "


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_an_mpi_rank_that_could_not_set_up_is_the_cause(tmp_path):
    mpiexec_or_skip()
    said, report = _launched(tmp_path, "mpi", "-np", "2", "--mpi-flavor", "mpich")
    assert report["cause"].startswith(_told(tmp_path)), report["cause"]
    headline = f"distconv-launch: mpiexec 0 failed with exit code 1: {report['cause']}"
    assert f"{headline} (after 0 restart(s)); {NOT_RESTARTING}; last lines of" in said, said
    assert (report["role"], report["rank"], report["restart"]) == ("mpiexec", 0, 0), report


#: ``python HELD_AT_FIRST OUT``: every rank fits a small net into ``OUT``, whose lock the test
#: holds through restart 0 (:func:`tests.held_lock.held_until_asked`): rank 0's fit is refused
#: it before the sync's setup, telling rank 1; at restart 1 rank 0 asks for it, and both train
HELD_AT_FIRST = (
    """\
import os
import sys
import time
from pathlib import Path
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network

restart = int(os.environ["DISTCONV_RESTART"])
OUT = sys.argv[1]


def main():
    sync = dist.init("sgd", lr=0.01)
    try:
"""
    + SMALL_NET
    + ASK_FOR_THE_LOCK
    + """        Trainer(net, sync, 2, out_dir=OUT, progress=False).fit(data, epochs=1)
        print(f"rank {sync.rank} trained", flush=True)
    finally:
        sync.close()


dist.run_main(main)
"""
)


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_an_mpi_rank_that_could_not_set_up_for_a_while_is_restarted(tmp_path):
    """Rank 0 is refused its output directory, in use (a process of the attempt before slow to
    exit, here the test): rank 1 is told, and the launcher restarts the job, blaming mpiexec
    with rank 0's words as the rank it told names them; the restart trains."""
    mpiexec_or_skip()
    script, out, run = tmp_path / "held.py", tmp_path / "out", tmp_path / "run"
    script.write_text(HELD_AT_FIRST)
    with held_until_asked(out, "j"):
        done = launch(
            "mpi", "-np", "2", "--mpi-flavor", "mpich", "--max-restarts", "1", "--run-dir",
            str(run), "--job-id", "j", "--", str(script), str(out), cwd=tmp_path, timeout=50,
        )  # fmt: skip
    said = done.stdout + done.stderr
    told = f"rank 0 could not set up: RunDirError: {out} is in use by pid {os.getpid()} on "
    headline = f"distconv-launch: mpiexec 0 failed with exit code 1: {told}"
    assert headline in said and RESTARTING in said, said[-3000:]
    assert "not restarting" not in said and done.returncode == 0, said[-3000:]
    assert "rank 0 trained" in said and "rank 1 trained" in said, said[-3000:]
    [restarted] = [json.loads(line) for line in (run / "restarts.jsonl").read_text().splitlines()]
    assert restarted["cause"].startswith(told), restarted
    assert (restarted["role"], restarted["rank"], restarted["restart"]) == ("mpiexec", 0, 0)


@pytest.mark.timeout(60)
def test_a_worker_that_could_not_set_up_is_blamed_not_the_one_it_told(tmp_path):
    """Worker 1, told by the shard, exits first (rank 0 outlives it): it exited 1, and the
    launcher blamed it (``worker 1 failed with exit code 1``). It exits 75, a victim: the
    launcher reports worker 0, with its error as the rank it told names it."""
    how = ("local", "--workers", "2", "--servers", "1")
    said, report = _launched(tmp_path, *how, mode=("outlive",))
    assert report["cause"].startswith(_told(tmp_path)), report["cause"]
    assert (report["role"], report["rank"], report["restart"]) == ("worker", 0, 0), report
    assert [(v["rank"], v["exit_code"]) for v in report["victims"]] == [(1, 75)], report
    headline = f"distconv-launch: worker 0 failed with exit code 1: {report['cause']}"
    stopped = "; worker 1 stopped because of it (exit code 75)"
    assert f"{headline} (after 0 restart(s)){stopped}; {NOT_RESTARTING}; last lines of" in said


@pytest.mark.timeout(60)
def test_a_worker_that_failed_and_hangs_is_blamed_not_the_one_it_told(tmp_path):
    """Rank 0 fails, tells worker 1 (which exits 75) and then never exits: after --settle the
    launcher blamed worker 1 (``failed with exit code 75``) and exited 75, "try again later" to
    a scheduler, for a configuration error. It blames worker 0, stopped, and exits 1."""
    how = ("local", "--workers", "2", "--servers", "1", "--settle", "0.5", "--grace", "1")
    said, report = _launched(tmp_path, *how, mode=("hang",), restarts=0)
    assert report["cause"].startswith(_told(tmp_path)), report["cause"]
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 0, None), report
    assert (report["signal"], report["signal_number"]) == (None, None), report
    assert [(v["rank"], v["exit_code"]) for v in report["victims"]] == [(1, 75)], report
    headline = "worker 0 failed and did not exit (stopped by the launcher)"
    assert f"distconv-launch: {headline}: {report['cause']} (after 0 restart(s)); " in said, said


@pytest.mark.timeout(60)
def test_a_named_worker_that_exits_on_its_own_after_the_settle_keeps_its_status(tmp_path):
    """Rank 0 fails, tells worker 1 (75) and exits 1 on its own 1 s after it, past --settle, its
    SIGTERM ignored: the launcher reported ``failed and did not exit``, exit code null.
    Its own exit code 1 stands; it is still the one blamed."""
    how = ("local", "--workers", "2", "--servers", "1", "--settle", "0.3", "--grace", "10")
    said, report = _launched(tmp_path, *how, mode=("late", "1"), restarts=0)
    assert report["cause"].startswith(_told(tmp_path)), report["cause"]
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 0, 1), report
    assert [(v["rank"], v["exit_code"]) for v in report["victims"]] == [(1, 75)], report
    headline = f"distconv-launch: worker 0 failed with exit code 1: {report['cause']}"
    assert f"{headline} (after 0 restart(s)); worker 1 stopped because" in said, said[-3000:]


#: a worker whose line naming rank 0 comes after its exit 75: a process of its group (which
#: ignores SIGTERM) writes it 0.5 s later, the output of a slow pump
_TELLS_LATE = f"""\
import os, subprocess, sys
ready, told = os.pipe()
later = (
    "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); os.close({{told}}); "
    "time.sleep(0.5); print({setup_failure_text(0, "CheckpointError: none")!r}, flush=True)"
)
subprocess.Popen([sys.executable, "-c", later.format(told=told)], pass_fds=[told])
os.close(told)
os.read(ready, 1)  # its SIGTERM ignored: the launcher's stop comes at once
sys.exit(75)
"""


@pytest.mark.timeout(30)
def test_the_victim_s_line_naming_the_cause_is_read_once_its_output_is_in(tmp_path):
    """With ``--settle 0`` the victim's last lines were read at its exit, before the line
    naming rank 0 had come: the victim was blamed, exit 75. Stand-ins: worker
    0 hangs, worker 1's line comes after its exit."""
    hangs = ChildSpec("worker", 0, [sys.executable, "-c", "import time; time.sleep(30)"])
    tells = ChildSpec("worker", 1, [sys.executable, "-c", _TELLS_LATE])
    status, err, report, _ = _run(tmp_path, [hangs, tells], settle=0)
    assert status == 1, err
    assert (report["rank"], report["exit_code"], report["signal"]) == (0, None, None), report
    assert report["cause"] == "rank 0 could not set up: CheckpointError: none", report
    assert "worker 0 failed and did not exit (stopped by the launcher)" in err, err


#: worker 1: names rank 0 as the rank that could not set up, then exits 75 (its victim)
_TELLS = (
    "import sys, time; time.sleep(0.2); "
    f"print({setup_failure_text(0, 'CheckpointError: none')!r}, flush=True); sys.exit(75)"
)


def _named(tmp_path: Path, cause: str) -> tuple[int, str, dict]:
    """Worker 0 runs ``cause`` (past the settle of 0.3 s), worker 1 :data:`_TELLS` of it:
    the launcher's status, its messages and failure.json."""
    hangs = ChildSpec("worker", 0, [sys.executable, "-c", cause])
    tells = ChildSpec("worker", 1, [sys.executable, "-c", _TELLS])
    status, err, report, _ = _run(tmp_path, [hangs, tells], settle=0.3)
    assert report["cause"] == "rank 0 could not set up: CheckpointError: none", report
    assert [(v["rank"], v["exit_code"]) for v in report["victims"]] == [(1, 75)], report
    return status, err, report


@pytest.mark.timeout(30)
def test_a_named_worker_killed_by_its_own_signal_after_the_settle_keeps_it(tmp_path):
    """Worker 0 ignores the launcher's SIGTERM and aborts on its own 1.5 s later: it was
    reported ``failed and did not exit (stopped by the launcher)``, signal null, status 1, as
    though the launcher's stop had ended it. Its SIGABRT stands (128 + 6)."""
    cause = (
        "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "time.sleep(1.5); os.abort()"
    )
    status, err, report = _named(tmp_path, cause)
    assert status == 134, err
    assert (report["rank"], report["exit_code"], report["signal"]) == (0, None, "SIGABRT"), report
    assert "worker 0 failed with signal SIGABRT: rank 0 could not set up" in err, err


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "code, said",
    [
        (
            143,
            "worker 0 failed, was stopped by the launcher after --settle and exited with code 143",
        ),
        (0, "worker 0 was named as the failure's cause but exited with code 0"),
    ],
)
def test_a_named_worker_that_exits_on_the_stop_s_sigterm_says_what_happened(tmp_path, code, said):
    """Worker 0 handles the stop's SIGTERM after the settle by exiting 143 or 0. With 143 it was
    reported ``failed with exit code 143`` and the launcher exited 143, as though the launcher
    itself had been sent SIGTERM; with 0, ``exited (code 0) while workers were running``, a
    server's words. The report says the launcher stopped it, or that the victim named it as the
    failure's cause, and the launcher exits 1."""
    cause = (
        f"import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit({code})); "
        "time.sleep(30)"
    )
    status, err, report = _named(tmp_path, cause)
    assert status == 1, err
    assert (report["rank"], report["exit_code"], report["signal"]) == (0, code, None), report
    assert f"distconv-launch: {said}: rank 0 could not set up: " in err, err


#: rank 0's line where rank 1's all_equal description between steps could not be written
#: (``tests/mpi/test_setup_fails_before_check.py`` makes it under mpiexec)
_MEETING = "rank 1 could not make its all_equal description: ValueError: Circular reference"


@pytest.mark.timeout(30)
def test_a_meeting_s_failure_is_reported_in_its_own_words_not_a_setup_s(tmp_path):
    """The ranks name rank 1's failed all_equal description in a meeting between steps, and
    the launcher's cause read ``rank 1 could not set up: ...``, a failure that never happened
    (it rebuilt the words as a setup's). Its own words now; still rank 1's failure, restarted
    (not the ranks' different jobs)."""
    line = f"distconv.sync.mpi.comm.JobMismatch: {_MEETING}"
    says = f"import sys; print({line!r}, flush=True); sys.exit(1)"
    specs = [ChildSpec("worker", 0, [sys.executable, "-c", says])]
    status, err, report, _ = _run(tmp_path, specs, settle=0.3, max_restarts=1)
    assert status == 1, err
    assert report["cause"] == _MEETING, report
    headline = f"distconv-launch: worker 0 failed with exit code 1: {_MEETING}"
    assert err.count(f"{headline}{RESTARTING}\n") == 1, err
    assert f"{headline} (after 1 restart(s)); last lines of" in err, err


@pytest.mark.timeout(30)
def test_a_named_worker_that_exits_75_after_the_settle_is_no_victim(tmp_path):
    """Worker 0, named by worker 1's line as the rank that could not set up, exits 75 on the
    stop's SIGTERM after the settle: it was reported as a victim (``failed with exit code 75
    (stopped because another rank failed: ...)``, worker 1 ``stopped too``) and the launcher
    exited 75, "try again later" to a scheduler, for the failure the victim named. It is the
    cause, named so, and the launcher exits 1."""
    cause = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(75)); "
        "time.sleep(30)"
    )
    status, err, report = _named(tmp_path, cause)
    assert status == 1, err
    assert (report["rank"], report["exit_code"], report["signal"]) == (0, 75, None), report
    said = "worker 0 was named as the failure's cause but exited with code 75"
    assert f"distconv-launch: {said}: rank 0 could not set up: " in err, err
    assert "; worker 1 stopped because of it (exit code 75); last lines of" in err, err


@pytest.mark.timeout(30)
@pytest.mark.parametrize("code", [0, 75])
def test_a_named_worker_that_exits_within_the_settle_is_blamed_as_after_it(tmp_path, code):
    """Worker 0, named by worker 1's line (its exit 75) as the rank that could not set up,
    exits ``code`` 0.5 s after it, within the settle of 3 s: the settle ended with no worker
    left and the victim was blamed, ``failed with exit code 75``, the launcher exiting 75,
    where the same exit 1.5 s later (past a settle of 1 s) blamed worker 0 and exited 1. The
    named worker is blamed either way."""
    folder = tmp_path / "order"
    tells = (
        f"import sys, time; from pathlib import Path; sys.path.insert(0, {str(_ORDER.parent)!r}); "
        f"from exits_in_order import record_pid; record_pid(Path({str(folder)!r}), 1); "
        f"time.sleep(0.2); print({setup_failure_text(0, 'CheckpointError: none')!r}, "
        "flush=True); sys.exit(75)"
    )
    named = [sys.executable, str(_ORDER), str(folder), "0", str(code), "1"]  # after worker 1
    specs = [ChildSpec("worker", 0, named), ChildSpec("worker", 1, [sys.executable, "-c", tells])]
    status, err, report, _ = _run(tmp_path, specs, settle=3.0)
    assert status == 1, err
    assert (report["rank"], report["exit_code"], report["signal"]) == (0, code, None), report
    assert report["cause"] == "rank 0 could not set up: CheckpointError: none", report
    assert [(v["rank"], v["exit_code"]) for v in report["victims"]] == [(1, 75)], report
    said = f"worker 0 was named as the failure's cause but exited with code {code}"
    assert f"distconv-launch: {said}: rank 0 could not set up: " in err, err
