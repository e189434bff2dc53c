"""A bare Pod that runs a rank or a shard is held to what their pods must do: the resume,
``--out``, probes, keys and GPU checks walked pod templates only (``walk._templates`` gave
nothing for kind Pod), so a Pod whose rank wrote ``--out`` onto the read-only root, did not
resume, had no probes, or trained on a GPU it did not request passed all of them; only its
placement was judged. A Pod that runs another program (a debugging shell)
is no part of the job's pods and is held to none of them."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _with_pod(gpus: int = 0, of: str = "Job") -> tuple[list[dict], dict]:
    """The rendered manifests of 1 rank and 1 shard, the pod of the ``of`` (Job: the rank's;
    StatefulSet: the shard's) added as bare Pod ``p`` (restartPolicy Never); and its first
    container. The rank's Pod replaces the Job: beside it, both would claim rank 0 of the
    shards' one world."""
    objs = copy.deepcopy(
        render_manifests(job_name="j", workers=1, servers=1, image="d:1", gpus=gpus)
    )
    (owner,) = [o for o in objs if o["kind"] == of]
    template = copy.deepcopy(owner["spec"]["template"])
    spec = {**template["spec"], "restartPolicy": "Never"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": "p"}}
    pod["spec"] = spec
    kept = [o for o in objs if o is not owner or of != "Job"]
    return [*kept, pod], spec["containers"][0]


def test_a_bare_pod_of_the_rendered_rank_or_shard_passes():
    for of in ("Job", "StatefulSet"):
        for gpus in (0, 1):
            objs, _ = _with_pod(gpus, of)
            assert manifest_problems(objs) == [], (of, gpus)


def _without(args: list[str], *flags: str) -> list[str]:
    """``args`` without each of ``flags`` and the value after it."""
    kept, skip = [], False
    for arg in args:
        if skip or arg in flags:
            skip = not skip and arg in flags
            continue
        kept.append(arg)
    return kept


def test_a_bare_pods_rank_that_does_not_resume_is_named():
    objs, rank = _with_pod()
    rank["args"] = _without(rank["args"], "--resume")
    assert manifest_problems(objs) == [
        "Pod p container worker: distconv train needs --resume auto, or a restart starts over"
    ]


def test_a_bare_pods_out_on_the_read_only_root_is_named():
    objs, rank = _with_pod()
    rank["args"] = [*_without(rank["args"], "--out"), "--out", "/data/run"]
    problems = manifest_problems(objs)
    assert any("Pod p container worker: --out /data/run is on no writable" in p for p in problems)


def test_a_bare_pods_rank_without_probes_is_named():
    objs, rank = _with_pod()
    del rank["livenessProbe"]
    assert any("Pod p container worker: livenessProbe" in p for p in manifest_problems(objs))


def test_a_bare_pods_gpu_rank_without_a_gpu_is_named():
    objs, rank = _with_pod(gpus=1)
    for part in rank["resources"].values():
        part.pop("nvidia.com/gpu", None)
    assert any("Pod p: 1 rank(s) per pod train on GPUs" in p for p in manifest_problems(objs))


def test_a_bare_pod_that_runs_another_program_is_held_to_none_of_it():
    objs, shell = _with_pod(of="StatefulSet")
    shell["args"] = ["sleep", "infinity"]
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        shell.pop(probe, None)
    assert manifest_problems(objs) == []
    objs[-1]["metadata"] = {"name": "p"}  # the Pod's labels, named once
    assert [p for p in manifest_problems(objs) if "label" in p] == [
        f"Pod p: label app.kubernetes.io/{key} is missing"
        for key in ("name", "instance", "component")
    ]
