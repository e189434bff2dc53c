"""A Job of one rank whose rank is given ``--rank 1`` (or any rank above 0): its world is one
rank, so it stops at start ("rank 1 is out of range for world size 1"). The check passed it:
``_pod_settings`` named a written ``--rank`` only in a job of more ranks, and
the one-pod Job's check, which refused it for its DISTCONV_WORLD_SIZE, now leaves a rank placed by
its flags to ``_pod_settings``."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

_PLACE = (
    "import sys; from distconv.train_args import train_parser as t; "
    "from distconv.runtime import detect_runtime as d, runtime_flags as f; "
    "r = d(f(t().parse_args(sys.argv[1:]))); print(r.rank, r.world_size)"
)


def _start(flags: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Where ``distconv train flags`` places itself in a pod with the variables ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DISTCONV_", "JOB_"))}
    argv = [sys.executable, "-c", _PLACE, *flags]
    return subprocess.run(argv, env={**base, **env}, capture_output=True, text=True, timeout=30)


def _job(flags: list[str], size: str, indexed: bool) -> list[dict]:
    """The rendered job of one worker, its Job Indexed or not, its rank given ``flags`` and
    ``DISTCONV_WORLD_SIZE`` ``size``."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=1, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    if not indexed:
        del job["spec"]["completionMode"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], *flags]
    env = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    container["env"] = [*env, {"name": "DISTCONV_WORLD_SIZE", "value": size}]
    return objs


_REFUSED = (
    "Job j-worker container worker: --rank 1 but Job j-worker runs 1 rank, rank 0: it would "
    "refuse to start (out of range), or wait for a rank 0 that never starts"
)


@pytest.mark.parametrize(
    ("flags", "size", "indexed", "pod"),
    [
        (["--rank", "1"], "2", False, {"DISTCONV_WORLD_SIZE": "2"}),  # once passed
        (["--rank", "1"], "1", False, {"DISTCONV_WORLD_SIZE": "1"}),
        (["--rank", "1"], "1", True, {"DISTCONV_WORLD_SIZE": "1", "JOB_COMPLETION_INDEX": "0"}),
        (["--rank", "1", "--world-size", "1"], "1", True, {"JOB_COMPLETION_INDEX": "0"}),
    ],
)
def test_a_rank_above_0_in_a_job_of_one_is_refused(flags, size, indexed, pod):
    started = _start(flags, pod)
    assert started.returncode != 0
    assert "rank 1 is out of range for world size 1" in started.stderr
    assert manifest_problems(_job(flags, size, indexed)) == [_REFUSED]


def test_rank_0_in_a_job_of_one_passes():
    started = _start(["--rank", "0"], {"DISTCONV_WORLD_SIZE": "2"})
    assert started.returncode == 0 and started.stdout.split() == ["0", "1"]
    assert manifest_problems(_job(["--rank", "0"], "2", False)) == []
    assert manifest_problems(_job(["--rank", "0"], "1", True)) == []
