"""A one-pod Job that is not Indexed, whose rank is placed by ``--rank`` or ``--world-size``:
the rank then reads no DISTCONV_WORLD_SIZE (its placement comes from the flags), so a stale
one above 1 stops nothing. The check of the one-pod Job said the rank "would refuse to start" and
refused the job."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.runtime import RuntimeConfigError, detect_runtime

pytestmark = pytest.mark.timeout(60)


def _one_pod_job(flags: list[str]) -> list[dict]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=1, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    spec = job["spec"]
    del spec["completionMode"]
    (container,) = spec["template"]["spec"]["containers"]
    container["args"] = [*container["args"], *flags]
    env = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    container["env"] = [*env, {"name": "DISTCONV_WORLD_SIZE", "value": "2"}]
    return objs


@pytest.mark.parametrize(
    ("flags", "runtime_flags"),
    [
        (["--rank", "0", "--world-size", "1"], {"rank": 0, "world_size": 1}),
        (["--rank", "0"], {"rank": 0}),
        (["--world-size=1"], {"world_size": 1}),
        (["--ra", "0"], {"rank": 0}),  # abbreviated, as argparse reads it
    ],
)
def test_a_rank_placed_by_its_flags_does_not_read_the_variable(flags, runtime_flags):
    runtime = detect_runtime(runtime_flags, environ={"DISTCONV_WORLD_SIZE": "2"})
    assert (runtime.rank, runtime.world_size) == (0, 1)
    assert manifest_problems(_one_pod_job(flags)) == []


def test_without_the_flags_the_variable_is_still_refused():
    with pytest.raises(RuntimeConfigError, match="nothing says which one this is"):
        detect_runtime({}, environ={"DISTCONV_WORLD_SIZE": "2"})
    assert manifest_problems(_one_pod_job([])) == [
        "Job j-worker: DISTCONV_WORLD_SIZE '2' but the Job is not Indexed: its one rank has no "
        "index and would refuse to start (set completionMode: Indexed)"
    ]
