"""A ``--rank`` or ``--world-size`` whose ``$(VAR)`` names no variable of the pod reaches every
rank as written (the kubelet leaves such a reference, as it turns ``$$(...)`` into ``$(...)``),
and the ranks' parser refuses the text. The check took any ``$(...)`` left in the flag for a
value only the cluster knows and passed it; a variable the cluster does fill in
(``valueFrom``, ``envFrom``) is still not judged. Each verdict is held to the pods started for
real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"


def _flagged(rank: str, env: list[dict] | None = None, **container: object) -> dict:
    """The workers' Job of 3 whose ranks give ``--rank rank --world-size 3``."""
    job = workers_job(3, [])
    (spec,) = job["spec"]["template"]["spec"]["containers"]
    spec["args"] = [*spec["args"], "--rank", rank, "--world-size", "3"]
    spec["env"] = [*spec["env"], *(env or [])]
    spec.update(container)
    return job


@pytest.mark.parametrize(
    ("rank", "env", "left"),
    [
        ("$(MY_RANK)", [], "$(MY_RANK)"),
        ("$$(JOB_COMPLETION_INDEX)", [], _INDEX),
        # the Job controller adds the index after the pod's env: R keeps the text
        ("$(R)", [{"name": "R", "value": _INDEX}], _INDEX),
    ],
    ids=["undefined", "escaped", "env-index"],
)
def test_a_reference_left_as_written_is_named(rank, env, left, tmp_path):
    job = _flagged(rank, env)
    started = start_pod(job, 1, tmp_path)
    assert started.returncode != 0 and f"got '{left}'" in started.stderr
    assert manifest_problems([job]) == [
        f"Job j-worker container worker: --rank {rank} reaches every rank as {left!r} (no "
        "variable of its pod fills it in): every rank would refuse it"
    ]


@pytest.mark.parametrize(
    "job",
    [
        _flagged(_INDEX),
        _flagged("$(R)", [{"name": "R", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]),
        _flagged("$(R)", envFrom=[{"configMapRef": {"name": "ranks"}}]),
    ],
    ids=["index", "valueFrom", "envFrom"],
)
def test_a_rank_the_pod_or_the_cluster_fills_in_is_not_named_so(job, tmp_path):
    problems = manifest_problems([job])
    assert not [p for p in problems if "no variable of its pod" in p]
    if job["spec"]["template"]["spec"]["containers"][0]["args"][-3] == _INDEX:
        assert trains(job, tmp_path) and problems == []
