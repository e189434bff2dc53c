"""A rank that a debugger holds (``/proc/PID/stat``: ``t``) as a peer gives up waiting on it is
what ``distconv-launch`` blames: ``worker 1's process (pid N) was stopped by a debugger, not
crashed``, with a way out for one who debugs on purpose (raise the timeout), not only "detach
it in time"."""

from __future__ import annotations

import shutil

import pytest

from launcher.stopped_processes import stopped_way_out
from tests.launcher.gave_up_line import GAVE_UP
from tests.launcher.launch_cli import launch

#: rank 1 lets any process trace it (Yama's ptrace_scope 1), its pid in ``MARK``; rank 0 has gdb
#: hold it (gdb in rank 0's group: the launcher's stop ends it), says that it gave up waiting
#: once it is held, and exits 1
HELD = """
import ctypes, os, subprocess, sys, time
from pathlib import Path
mark = Path(sys.argv[1])
if os.environ["RANK"] == "1":
    ctypes.CDLL(None).prctl(0x59616D61, ctypes.c_ulong(-1), 0, 0, 0)  # PR_SET_PTRACER_ANY
    mark.write_text(str(os.getpid()))
    time.sleep(60)
    sys.exit(0)
while not mark.exists():
    time.sleep(0.01)
pid = mark.read_text()
gdb = ["gdb", "-q", "-nx", "-p", pid, "-batch", "-ex", "shell sleep 60"]
subprocess.Popen(gdb, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.monotonic() + 20
while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "t":
    assert time.monotonic() < deadline, "gdb did not attach"
    time.sleep(0.01)
print(sys.argv[2], file=sys.stderr, flush=True)
sys.exit(1)
"""


@pytest.mark.timeout(60)
@pytest.mark.skipif(shutil.which("gdb") is None, reason="needs gdb to hold a rank")
def test_a_rank_a_debugger_holds_is_blamed_with_a_way_to_debug(tmp_path):
    program, mark = tmp_path / "held.py", tmp_path / "held-pid"
    program.write_text(HELD)
    done = launch(
        "local", "--run-dir", str(tmp_path / "run"), "--workers", "2", "--servers", "0", "--",
        str(program), str(mark), GAVE_UP, cwd=tmp_path, timeout=50,
    )  # fmt: skip
    err = done.stderr[-4000:]
    said = (
        f"distconv-launch: worker 1's process (pid {mark.read_text()}) was stopped by a "
        f"debugger, not crashed: worker 0 gave up waiting: {GAVE_UP}; "
        f"{stopped_way_out('a debugger')} (after 0 restart(s))"
    )
    assert said in done.stderr, err
    assert "raise --timeout" in stopped_way_out("a debugger")  # one debugging on purpose
    assert done.returncode == 1, err  # the launcher's stop ended it: no status of its own
