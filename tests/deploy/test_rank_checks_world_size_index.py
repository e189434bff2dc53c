"""A ``DISTCONV_WORLD_SIZE`` of ``$(JOB_COMPLETION_INDEX)`` in the pod's env (or in a Job that
is not Indexed) reaches the ranks as written, and every rank that reads it refuses it ("must be
an integer"); on the command line of an Indexed Job's pods, the index makes each rank's world
its own index. The check took any ``$(`` in the variable for a value only the cluster knows and
passed both, as it did for ``--rank``/``--world-size`` before 3ee4add. A rank
that reads no ``DISTCONV_WORLD_SIZE`` (both flags given) or whose ``--world-size`` wins over
the index's world still passes. Each verdict is held to the pods started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import trains
from tests.deploy.job_shapes import kubernetes_doc_text, workers_job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"
_PAIR = [f"RANK={_INDEX}", "WORLD_SIZE=3"]
_REFUSED = "every rank would refuse to start"


def _job(head: list[str], value: str | None, flags: list[str], indexed: bool = True) -> dict:
    """The workers' Job of 3 (of 1 unless ``indexed``) behind ``head``, its pod's
    ``DISTCONV_WORLD_SIZE`` ``value`` (None: as rendered), its ranks given ``flags``."""
    job = workers_job(3, head)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    for var in container["env"] if value is not None else ():
        if var["name"] == "DISTCONV_WORLD_SIZE":
            var["value"] = value
    container["args"] = [*container["args"], *flags]
    if not indexed:
        del job["spec"]["completionMode"]
        job["spec"]["completions"] = job["spec"]["parallelism"] = 1
    return job


_LEFT = (
    f"Job j-worker: DISTCONV_WORLD_SIZE {_INDEX!r} reaches the ranks as written, and they read "
    f"it: {_REFUSED} (the kubelet fills in {_INDEX} only on the command line of an Indexed "
    "Job's pods)"
)
_EACH = (
    f"Job j-worker: DISTCONV_WORLD_SIZE {_INDEX} makes each rank's index its world size: {_REFUSED}"
)


@pytest.mark.parametrize(
    ("head", "value", "flags", "indexed", "problem"),
    [
        ([], _INDEX, [], True, _LEFT),
        ([], _INDEX, ["--world-size", "3"], True, _LEFT),
        (["env", *_PAIR], _INDEX, [], True, _LEFT),
        (["env", "-i", *_PAIR, f"DISTCONV_WORLD_SIZE=${_INDEX}"], None, [], True, _LEFT),
        (["env", f"DISTCONV_WORLD_SIZE={_INDEX}"], None, [], True, _EACH),
        (["env", "-i", *_PAIR, f"DISTCONV_WORLD_SIZE={_INDEX}"], None, [], True, _EACH),
        ([], _INDEX, [], False, _LEFT),
        (["env", f"DISTCONV_WORLD_SIZE={_INDEX}"], None, [], False, _LEFT),
    ],
)
def test_a_world_size_variable_no_variable_fills_in_is_named(
    head, value, flags, indexed, problem, tmp_path
):
    job = _job(head, value, flags, indexed)
    assert not trains(job, tmp_path)
    assert problem in manifest_problems([job])


@pytest.mark.parametrize(
    ("head", "value", "flags"),
    [
        (["env", f"DISTCONV_WORLD_SIZE={_INDEX}"], None, ["--world-size", "3"]),
        ([], _INDEX, ["--rank", _INDEX, "--world-size", "3"]),
    ],
)
def test_a_world_size_variable_the_ranks_do_not_need_passes(head, value, flags, tmp_path):
    job = _job(head, value, flags)
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


def test_one_the_cluster_fills_in_is_not_judged():
    job = _job([], "$(W)", [])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["env"].insert(0, {"name": "W", "valueFrom": {"fieldRef": {"fieldPath": "x"}}})
    assert manifest_problems([job]) == []


def test_the_docs_say_so():
    text = kubernetes_doc_text()
    assert "that keeps `$(JOB_COMPLETION_INDEX)` as written is refused too wherever" in text
    assert "`env DISTCONV_WORLD_SIZE=$(JOB_COMPLETION_INDEX)` on an Indexed Job's" in text
