"""A ``--rank`` or ``--world-size`` that names ``$(JOB_COMPLETION_INDEX)``: the kubelet fills the
reference in only on the command line of an Indexed Job's pods, where the Job controller adds the
variable. In a Job that is not Indexed it reaches ``distconv train`` as written, which refuses the
text; in an Indexed Job ``--world-size $(JOB_COMPLETION_INDEX)`` makes each rank's index its
world (rank 0's world is 0, rank R's is R: out of range). The check took any ``$(...)`` in the
flag for a value only the cluster knows and passed both, and did so under an
MPIJob (whose launcher is no Indexed Job's pod). Each verdict is held to the pods started for
real."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import mpijob, workers_job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"
_HERE = "Job j-worker container worker"


def _flagged(workers: int, *flags: str, indexed: bool = True) -> dict:
    """The workers' Job of ``workers`` ranks given ``flags``; not Indexed unless ``indexed``."""
    job = workers_job(workers, [])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], *flags]
    if not indexed:
        del job["spec"]["completionMode"]
    return job


@pytest.mark.parametrize(
    "flags",
    [("--rank", _INDEX), ("--rank", _INDEX, "--world-size", "1"), ("--rank", f"0{_INDEX}")],
)
def test_the_index_in_a_job_that_is_not_indexed_is_named(flags, tmp_path):
    job = _flagged(1, *flags, indexed=False)
    started = start_pod(job, 0, tmp_path)
    assert started.returncode != 0 and "argument --rank: must be an integer" in started.stderr
    assert manifest_problems([job]) == [
        f"{_HERE}: --rank {flags[1]} reaches every rank as written, as the kubelet fills in "
        f"{_INDEX} only in an Indexed Job's pods: every rank would refuse it (set "
        "completionMode: Indexed on Job j-worker)"
    ]


def test_a_world_size_of_the_index_is_named(tmp_path):
    job = _flagged(3, "--world-size", _INDEX)
    assert not trains(job, tmp_path)
    assert start_pod(job, 0, tmp_path).returncode != 0
    assert manifest_problems([job]) == [
        f"{_HERE}: --world-size {_INDEX} makes each rank's index its world size: every rank "
        "would refuse to start"
    ]


@pytest.mark.parametrize("indexed", [True, False])
def test_the_rank_of_the_index_where_the_pods_have_it_passes(indexed, tmp_path):
    job = _flagged(1, "--rank", _INDEX, "--world-size", "1", indexed=indexed)
    if not indexed:  # the variable the pod defines itself is filled in anywhere
        (container,) = job["spec"]["template"]["spec"]["containers"]
        container["env"] = [{"name": "JOB_COMPLETION_INDEX", "value": "0"}, *container["env"]]
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


def test_the_index_under_an_mpijob_is_named():
    """mpirun passes the launcher's arguments to every rank; the launcher's pod is no Indexed
    Job's, so the text reaches them as written and the ranks' parser refuses it."""
    objs = mpijob(None, ["--rank", _INDEX])
    parse = "import sys; from distconv.train_args import train_parser as t; "
    parse += "t().parse_args(sys.argv[1:])"
    refused = subprocess.run(
        [sys.executable, "-c", parse, "--rank", _INDEX], capture_output=True, text=True, timeout=30
    )
    assert refused.returncode == 2 and "--rank: must be an integer" in refused.stderr
    assert manifest_problems(objs) == [
        f"MPIJob m Launcher container launcher: --rank {_INDEX} reaches every rank as written, "
        f"as the kubelet fills in {_INDEX} only in an Indexed Job's pods: every rank would "
        "refuse it (mpirun gives each rank its own: drop the flag)"
    ]
