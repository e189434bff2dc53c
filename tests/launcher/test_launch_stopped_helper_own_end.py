"""A child that ends by itself is reported by its own end, whatever process the launcher's stop
then finds stopped: "was stopped (SIGSTOP), not crashed" is said only of a child that the stop
ended, and a crash is never laid on a stopped peer (:func:`launcher.stopped_blame.as_found`).

A rank that starts a helper process (in its own process group, as a data loader's is) and then
fails of an error of its own, or crashes, while that helper is stopped: the stop found the
helper stopped in the rank's group, and the headline said ``worker 0's process (pid N) was
stopped (SIGSTOP), not crashed`` without the rank's exit code or its error, though the launcher
exited with the rank's own status.

A rank that crashes (SIGSEGV) after its last line gave up a wait on its shard, while its peer
is stopped: the crash was laid on the stopped peer, the launcher exiting 1, not 139."""

from __future__ import annotations

import json

import pytest

from tests.launcher.gave_up_line import GAVE_UP
from tests.launcher.stopped_child import launch_marked

#: rank 0 forks a helper that stops itself (SIGSTOP), its pid in ``MARK``, then, once it is
#: stopped, raises an error of its own or kills itself (SIGSEGV)
HELPER_STOPPED = """
import os, signal, sys, time
from pathlib import Path
pid = os.fork()
if pid == 0:
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
Path(sys.argv[1]).write_text(str(pid))
while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
    time.sleep(0.01)
if sys.argv[2] == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
raise ValueError("a label of 7")
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("end", "headline", "status", "signal"),
    [
        ("error", "worker 0 failed with exit code 1 (after 0 restart(s))", 1, None),
        ("crash", "worker 0 failed with signal SIGSEGV", 139, "SIGSEGV"),
    ],
    ids=["own-error", "crash"],
)
def test_a_rank_that_ends_by_itself_is_not_said_stopped(tmp_path, end, headline, status, signal):
    done, mark, run = launch_marked(tmp_path, HELPER_STOPPED, 1, end)
    err = done.stderr[-4000:]
    assert f"distconv-launch: {headline}" in done.stderr, err
    assert f"(pid {mark.read_text()}) was stopped" not in done.stderr, err
    report = json.loads((run / "failure.json").read_text())
    assert (report["role"], report["rank"], report["signal"]) == ("worker", 0, signal), report
    assert done.returncode == status, err


#: rank 1 stops itself (SIGSTOP), its pid in ``MARK``; rank 0, once it is stopped, says the words
#: given (that it gave up waiting on its shard), then crashes (SIGSEGV)
GAVE_UP_THEN_CRASHED = """
import os, signal, sys, time
from pathlib import Path
mark = Path(sys.argv[1])
if os.environ["RANK"] == "1":
    mark.write_text(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGSTOP)
    sys.exit(0)
while not mark.exists() or Path(f"/proc/{mark.read_text()}/stat").read_text().split()[2] != "T":
    time.sleep(0.01)
print(sys.argv[2], file=sys.stderr, flush=True)
os.kill(os.getpid(), signal.SIGSEGV)
"""


@pytest.mark.timeout(60)
def test_a_crash_after_a_wait_given_up_is_not_laid_on_the_stopped_peer(tmp_path):
    done, mark, run = launch_marked(tmp_path, GAVE_UP_THEN_CRASHED, 2, GAVE_UP)
    err = done.stderr[-4000:]
    assert "distconv-launch: worker 0 failed with signal SIGSEGV" in done.stderr, err
    assert f"(pid {mark.read_text()}) was stopped" not in done.stderr, err
    report = json.loads((run / "failure.json").read_text())
    assert (report["role"], report["rank"], report["signal"]) == ("worker", 0, "SIGSEGV"), report
    assert done.returncode == 139, err
