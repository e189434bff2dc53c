"""The shards' StatefulSet and Service let the shards meet worker 0 before any of them is ready:
a shard becomes ready only once worker 0 has seeded it, after every shard answered its hello by
its DNS name, so a shard held back until another is ready, or a name published only for ready
pods, leaves the job unready for good; the checks name both. And the workers' Job must be
Indexed, the one place their ranks come from."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _edited(servers: int, edit) -> list[str]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=servers, image="d:1"))
    service, sts, _ = objs
    edit(service["spec"], sts["spec"])
    return manifest_problems(objs)


@pytest.mark.parametrize(
    "servers, edit, named",
    [
        (2, lambda svc, sts: None, None),
        (2, lambda svc, sts: sts.pop("podManagementPolicy"), "'OrderedReady'"),
        (2, lambda svc, sts: sts.update(podManagementPolicy="OrderedReady"), "'OrderedReady'"),
        (1, lambda svc, sts: sts.pop("podManagementPolicy"), None),  # one shard waits for none
        (2, lambda svc, sts: svc.pop("publishNotReadyAddresses"), "publishNotReadyAddresses"),
        (1, lambda svc, sts: svc.update(publishNotReadyAddresses=False), "publishNotReady"),
    ],
)
def test_shards_that_could_never_become_ready_are_refused(servers, edit, named):
    problems = _edited(servers, edit)
    if named is None:
        assert problems == []
    else:
        (problem,) = problems
        assert problem.startswith("StatefulSet j-pserver: ") and named in problem, problems
        assert "worker 0" in problem


@pytest.mark.parametrize(
    "mode, workers, refused",
    [("Indexed", 4, False), ("NonIndexed", 4, True), (None, 4, True), ("NonIndexed", 1, False)],
)
def test_a_worker_job_that_gives_no_rank_index_is_refused(mode, workers, refused, tmp_path):
    """The ranks of a parameter-server job take theirs from JOB_COMPLETION_INDEX, which a
    NonIndexed Job (the default) does not set: every worker exits at start, as a real one does
    here with the Job's environment."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=workers, servers=1, image="d:1"))
    job = objs[2]
    if mode is None:
        job["spec"].pop("completionMode")
    else:
        job["spec"]["completionMode"] = mode
    wrong = [p for p in manifest_problems(objs) if "completionMode" in p]
    assert bool(wrong) is refused, wrong
    if refused:
        assert wrong[0].startswith("Job j-worker: completionMode must be Indexed")
        (container,) = job["spec"]["template"]["spec"]["containers"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DISTCONV_", "JOB_"))}
        env.update({e["name"]: e["value"] for e in container["env"] if "value" in e})
        env.pop("DISTCONV_KEYS")
        run = subprocess.run(
            [sys.executable, "-m", "distconv", "train", "--insecure", "--epochs", "1"],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=50,
        )  # fmt: skip
        assert run.returncode != 0 and "JOB_COMPLETION_INDEX" in run.stderr, run.stderr


@pytest.mark.parametrize("unset", [None, "dropped"])  # completions: null, or no such field
@pytest.mark.parametrize("parallelism, refused", [(4, True), (1, False), (None, False)])
def test_a_worker_job_without_completions_or_index_is_refused(parallelism, refused, unset):
    """A NonIndexed Job without completions runs its parallelism's pods at once, none with an
    index: with more than one, every rank exits at start, as with completions (it was accepted)."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=4, servers=1, image="d:1"))
    spec = objs[2]["spec"]
    del spec["completionMode"], spec["completions"]
    spec["parallelism"] = parallelism  # null: 1, as Kubernetes defaults it
    if unset is None:
        spec["completions"] = None
    # one pod's rank beside DISTCONV_WORLD_SIZE 4 is named too (test_unindexed_job.py)
    wrong = [p for p in manifest_problems(objs) if "completionMode must be Indexed" in p]
    assert bool(wrong) is refused, wrong
    if refused:
        assert wrong[0].startswith("Job j-worker: completionMode must be Indexed"), wrong
