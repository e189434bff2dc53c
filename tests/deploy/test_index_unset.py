"""``env -u JOB_COMPLETION_INDEX distconv train`` in an Indexed Job takes the index alone from
the ranks: each trains as rank 0 of 1 with the rest of its pod's environment kept. The check
named it as "the ranks' command line empties their environment (env -i, exec -c)", which it
does not."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(60)

_PLACE = (
    "from distconv.runtime import detect_runtime as d; r = d(); "
    "print(r.rank, r.world_size, r.job_id)"
)


def test_env_u_takes_the_index_alone():
    pod = {k: v for k, v in os.environ.items() if not k.startswith("DISTCONV_")}
    pod.update(JOB_COMPLETION_INDEX="1", DISTCONV_JOB_ID="j")
    argv = ["env", "-u", "JOB_COMPLETION_INDEX", sys.executable, "-c", _PLACE]
    out = subprocess.run(argv, env=pod, capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["0", "1", "j"], out.stderr  # the job id kept: not emptied
    job = workers_job(3, ["env", "-u", "JOB_COMPLETION_INDEX"])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["env"] = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    assert manifest_problems([job]) == [
        "Job j-worker: the ranks' command line takes JOB_COMPLETION_INDEX from them (env -i, "
        "env -u, exec -c): with no index every rank would train as rank 0 of 1 (the Job runs 3)"
    ]
