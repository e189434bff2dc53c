"""A script whose ranks run different jobs (each rank its own batch size), run through
``distconv.distributed.run_main``: the MPI and the parameter-server tests of its one line
(``tests/mpi/test_run_main_errors.py``, ``tests/sync/ps/test_ps_run_main_other_jobs.py``);
and a real launch of two workers whose report must name their different jobs
(``tests/launcher/test_launch_other_job.py``, ``tests/launcher/test_failure_other_job_id.py``)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

#: the lines of a script's ``main`` (inside its ``try``, indented eight) that make a small net
#: ``net`` and its ``data``: the jobs of these scripts differ by their other settings alone
SMALL_NET = """\
        net = Network()
        net.add("out", FullyConnected(4, 1), "x")
        net.add("loss", MSELoss(), ["out", "target"])
        rng = np.random.default_rng(0)
        data = {"x": rng.standard_normal((64, 4)), "target": rng.standard_normal((64, 1))}
"""

#: ``python OTHER_JOBS OUT_DIR``: every rank trains a small net with batch size 2 + its rank,
#: so each one's setup is refused (a JobRefused) under whichever transport ``init`` picks
OTHER_JOBS = (
    """\
import sys
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network


def main():
    sync = dist.init("sgd", lr=0.01)
    try:
"""
    + SMALL_NET
    + """        trainer = Trainer(net, sync, 2 + sync.rank, out_dir=sys.argv[1], progress=False)
        trainer.fit(data, epochs=1)
    finally:
        sync.close()


dist.run_main(main)
"""
)


def launch_two_workers(tmp_path: Path, flags: list[str], program: list[str]) -> Any:
    """A real ``distconv-launch local`` of two workers and one shard (``flags`` added before
    ``--``, ``program`` after it), run to its end in ``tmp_path``: its CompletedProcess. The
    workers say errors in one line (no ``DISTCONV_DEBUG``), with no rank of this test's own."""
    from tests.child_env import child_path
    from tests.launcher.launch_cli import launcher_env
    from tests.processes import run_job

    env = launcher_env(
        {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    )
    env["PYTHONPATH"] = child_path()
    env.pop("DISTCONV_DEBUG", None)  # the one-line error, not a traceback
    argv = [sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "1",
            *flags, "--run-dir", str(tmp_path / "run"), "--", *program]  # fmt: skip
    return run_job(argv, env=env, timeout=80, cwd=tmp_path)


def assert_different_jobs_reported(tmp_path: Path, done: Any, cause: str) -> dict[str, Any]:
    """That the launch ``done`` (:func:`launch_two_workers`) ended on the ranks' different
    jobs: exit 1, a headline blaming no rank and failure.json's cause matching ``cause`` (a
    pattern), no restart tried; failure.json, read."""
    said = done.stderr + done.stdout[-3000:]
    assert done.returncode == 1, said
    headline = (
        r"distconv-launch: the ranks run different jobs, which stops every rank \(worker [01] "
        r"exited first, with exit code 1\): " + cause
    )
    assert re.search(headline, done.stderr), said
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert re.match(cause, report["cause"] or ""), report
    assert report["restart"] == 0 and "restarting the job" not in done.stderr, said
    return report
