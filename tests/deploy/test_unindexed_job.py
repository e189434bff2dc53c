"""A workers' Job that is not Indexed runs one pod, whose rank has no index: it trains as rank 0
of 1, refuses a DISTCONV_WORLD_SIZE above 1 at start, and is the only worker the shards see. The
check compared counts for Indexed Jobs only, and passed such a Job beside shards that wait for 2
workers."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.runtime import RuntimeConfigError, detect_runtime

pytestmark = pytest.mark.timeout(60)


def _not_indexed(workers: int, size: str | None) -> list[dict]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=workers, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    spec = job["spec"]
    del spec["completionMode"]
    spec["completions"] = spec["parallelism"] = 1
    (container,) = spec["template"]["spec"]["containers"]
    env = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    container["env"] = env + (
        [] if size is None else [{"name": "DISTCONV_WORLD_SIZE", "value": size}]
    )
    return objs


def test_a_world_size_above_one_without_an_index_is_refused():
    with pytest.raises(RuntimeConfigError, match="nothing says which one this is"):
        detect_runtime(environ={"DISTCONV_WORLD_SIZE": "2"})
    problems = manifest_problems(_not_indexed(2, "2"))
    assert problems == [
        "Job j-worker: DISTCONV_WORLD_SIZE '2' but the Job is not Indexed: its one rank has no "
        "index and would refuse to start (set completionMode: Indexed)",
        "StatefulSet j-pserver: --workers 2 but Job j-worker runs 1 rank",
    ]


@pytest.mark.parametrize("size", [None, "1", " 1"])
def test_one_rank_that_the_shards_serve_alone_passes(size):
    env = {} if size is None else {"DISTCONV_WORLD_SIZE": size}
    assert detect_runtime(environ=env).world_size == 1
    assert manifest_problems(_not_indexed(1, size)) == []


def test_shards_waiting_for_more_workers_are_named():
    (problem,) = manifest_problems(_not_indexed(3, None))
    assert problem == "StatefulSet j-pserver: --workers 3 but Job j-worker runs 1 rank"
