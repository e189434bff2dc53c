"""A rank killed by a signal where Hydra runs more than one proxy (several hosts, or several
names of this one) is named from Hydra's banner, the one line of it Hydra then prints.

``distconv-launch mpi -np 2 -H localhost:1,127.0.0.1:1`` with rank 1 SIGKILLed exited 255 with
``cause`` null: Hydra printed its banner (``=   PID 4242 RUNNING AT 127.0.0.1`` / ``=   EXIT
CODE: 9``) but neither its ``Exit codes:`` statuses nor its exit string, and mpiexec exited 255.
The same job on one proxy (``-H localhost:2``) exits 137, naming the signal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launcher.mpi_exit import hydra_banner, mpiexec_reader, signal_cause
from tests.launcher.test_launch_mpi_signal import _run
from tests.processes import job_left

#: Hydra's banner for the process 4242 on node-b, whose wait status is ``code``
BANNER = [
    "===================================================================================",
    "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
    "=   PID 4242 RUNNING AT node-b",
    "=   EXIT CODE: {code}",
    "=   CLEANING UP REMAINING PROCESSES",
    "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES",
    "===================================================================================",
    "[proxy:0@node-a] HYD_pmcd_pmip_control_cmd_cb (pmip_cb.c:490): assert (!closed) failed",
    "[mpiexec@node-a] main (mpiexec.c:270): process manager error waiting for completion",
]


def _banner(code: int) -> list[str]:
    return ["[0] step 3", "[1] step 3", *(line.format(code=code) for line in BANNER)]


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_rank_killed_beside_another_proxy_is_named_with_its_host_and_signal(tmp_path):
    """Now and then (about 1 run in 12 here) Hydra prints the failing host's statuses and its
    exit string after all, and exits 9: the statuses say it then, as on one proxy. Which of the
    two Hydra printed is read from mpiexec's log, so that each is held to its own cause."""
    done, report = _run(tmp_path, "kill", 9, "-H", "localhost:1,127.0.0.1:1")
    assert job_left(done.env, 5) == {}  # Hydra's proxies and rank 0 too
    assert done.returncode == 137, done.stderr  # 128 + 9, as on one proxy: the docs' OOM kill
    assert (report["exit_code"], report["signal"], report["signal_number"]) == (None, "SIGKILL", 9)
    if "Exit codes:" in Path(report["log"]).read_text():  # the statuses: one host's
        said = r"a rank died of signal 9 \(SIGKILL\), as mpiexec says"
        cause = f"{said}; mpiexec itself exited with code 9"
    else:  # the banner alone: rank 1 is the second host's, 127.0.0.1; mpiexec itself exits
        # 255 (its proxies' errors)
        said = r"a rank on 127\.0\.0\.1 \(PID \d+\) died of signal 9 \(SIGKILL\), as mpiexec says"
        cause = f"{said}; mpiexec itself exited with code 255"
    assert re.fullmatch(cause, report["cause"]), report
    headline = [line for line in done.stderr.splitlines() if "mpiexec 0 failed" in line]
    assert len(headline) == 1 and re.search(f"with signal SIGKILL: {said}", headline[0])


@pytest.mark.parametrize(
    ("code", "status", "cause"),
    [
        (9, -9, "a rank on node-b (PID 4242) died of signal 9 (SIGKILL), as mpiexec says"),
        (139, -11, "a rank on node-b (PID 4242) died of signal 11 (SIGSEGV), as mpiexec says"),
        (6, -6, "a rank on node-b (PID 4242) died of signal 6 (SIGABRT), as mpiexec says"),
    ],
    ids=["sigkill", "sigsegv-core-dumped", "sigabrt"],
)
def test_the_banners_code_is_a_wait_status(code, status, cause):
    """Hydra prints the banner only for a process that did not exit, with its wait status:
    128 is the core-dump bit (139: SIGSEGV, a core written), not a signal of its own."""
    assert signal_cause(_banner(code)) == cause
    assert mpiexec_reader(2).read(_banner(code), 255) == (
        status,
        f"{cause}; mpiexec itself exited with code 255",
    )


def test_a_banner_names_no_more_than_it_says():
    """An older Hydra's banner names no process; a banner cut off before its code says
    nothing; statuses, even cut off above, say it and not the banner; a rank's quoted banner
    (behind its tag) is no banner; a code that is no signal is named, mpiexec's status kept."""
    older = [line for line in _banner(9) if "RUNNING AT" not in line]
    assert hydra_banner(older) == ("a rank", 9)
    assert hydra_banner(_banner(9)[:4]) is None  # the code's line cut off
    assert hydra_banner([*_banner(9), "[node-b] 0,9"]) is None
    assert hydra_banner([f"[1] {line}" for line in _banner(9)]) is None
    assert mpiexec_reader(2).read(_banner(256), 255) == (
        255,
        "a rank on node-b (PID 4242) ended with Hydra's EXIT CODE 256; "
        "mpiexec itself exited with code 255",
    )
    # mpiexec itself ended by the same signal (the launcher's SIGKILL of an overdue one): it
    # is reported as it is, the banner's rank named
    said = "a rank on node-b (PID 4242) died of signal 9 (SIGKILL), as mpiexec says"
    assert mpiexec_reader(2).read(_banner(9), -9) == (-9, said)
