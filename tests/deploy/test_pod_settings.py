"""A rank's rank, world size and job id come from its pod (the Job index or MPI, the Job's
completions or ``-np``, ``DISTCONV_JOB_ID``); a flag written into a hand-edited manifest's
train arguments wins over them. :func:`manifest_problems` names the ones that would fail or
hang every rank, and leaves alone a ``$(VAR)`` the kubelet fills in per pod (the check used to
pass ``--rank 0`` on all four workers, and a job id the shards do not serve)."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.render import EXAMPLE_TRAIN_ARGS, EXAMPLES
from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)


def _example(name: str) -> list[dict]:
    return copy.deepcopy(render_manifests(**{**EXAMPLES[name], "train_args": EXAMPLE_TRAIN_ARGS}))


def _main(obj: dict, role: str | None = None) -> dict:
    spec = obj["spec"]
    template = spec["mpiReplicaSpecs"][role]["template"] if role else spec["template"]
    return template["spec"]["containers"][0]


def _ranks(objs: list[dict]) -> dict:
    """The container whose argv runs the ranks' ``distconv train``."""
    if objs[0]["kind"] == "MPIJob":
        return _main(objs[0], "Launcher")
    return _main(objs[2])


def _shard(objs: list[dict]) -> dict:
    return _main(objs[1])


def _set_env(container: dict, name: str, value: str | None) -> None:
    container["env"] = [e for e in container.get("env", []) if e["name"] != name]
    if value is not None:
        container["env"].append({"name": name, "value": value})


@pytest.mark.parametrize("example", ["pserver", "mpijob"])
def test_the_rendered_examples_set_none_of_them(example):
    assert manifest_problems(_example(example)) == []


@pytest.mark.parametrize(
    "example, flags, words",
    [
        ("pserver", ["--rank", "0"], "--rank 0 is in every rank's arguments, so the 4 ranks of "
         "Job digits-ps-worker would all claim it"),
        ("pserver", ["--ra=1"], "--rank 1 is in every rank's arguments"),  # as the ranks read it
        ("mpijob", ["--rank", "0"], "so the 4 ranks of MPIJob digits-mpi would all claim it"),
        ("pserver", ["--world-size", "3"], "--world-size 3 but Job digits-ps-worker runs 4 ranks"),
        ("mpijob", ["--world-size=8"], "--world-size 8 but MPIJob digits-mpi runs 4 ranks"),
        ("pserver", ["--job-id", "other"], "job id 'other' (--job-id) but StatefulSet "
         "digits-ps-pserver container pserver serves 'digits-ps' (DISTCONV_JOB_ID): the shards "
         "would refuse every worker's hello"),
    ],
)  # fmt: skip
def test_a_flag_that_overrides_the_pods_is_named(example, flags, words):
    objs = _example(example)
    _ranks(objs)["args"] += flags
    problems = manifest_problems(objs)
    assert len(problems) == 1 and words in problems[0], problems


@pytest.mark.parametrize(
    "example, flags",
    [
        ("pserver", ["--rank", "$(JOB_COMPLETION_INDEX)"]),  # each pod fills in its own
        ("pserver", ["--world-size", "4"]),  # what the pods say anyway
        ("pserver", ["--world-size", "04"]),  # 4 as the ranks read it
        ("mpijob", ["--world-size=4"]),
        ("pserver", ["--job-id", "digits-ps"]),
        ("pserver", ["--job-id", "$(JOB)"]),
        ("pserver", ["--job-id="]),  # none given: the rank reads DISTCONV_JOB_ID
        ("pserver", ["--job-id", ""]),
        ("mpijob", ["--job-id", "anything"]),  # no shards to refuse it
    ],
)
def test_a_flag_that_agrees_with_the_pods_or_is_filled_in_passes(example, flags):
    objs = _example(example)
    _ranks(objs)["args"] += flags
    assert manifest_problems(objs) == []


def test_one_rank_may_name_itself():
    objs = _example("pserver")
    objs[2]["spec"].update(completions=1, parallelism=1)
    _set_env(_ranks(objs), "DISTCONV_WORLD_SIZE", "1")
    args = _shard(objs)["args"]
    args[args.index("--workers") + 1] = "1"
    _ranks(objs)["args"] += ["--rank", "0", "--world-size", "1"]
    assert manifest_problems(objs) == []


@pytest.mark.parametrize(
    "worker_env, shard_env, shard_flags, words",
    [
        # the worker's environment without DISTCONV_JOB_ID: it reads the default job id
        (None, "digits-ps", [], "job id 'local' (the default, without DISTCONV_JOB_ID) but"),
        ("", "digits-ps", [], "job id 'local' (the default, without DISTCONV_JOB_ID) but"),
        ("digits-ps", "digits-ps", ["--job-id", "x"], "serves 'x' (--job-id)"),
        ("a", "b", [], "job id 'a' (DISTCONV_JOB_ID) but StatefulSet"),
    ],
)
def test_the_shards_and_workers_job_ids_are_compared_wherever_they_come_from(
    worker_env, shard_env, shard_flags, words
):
    objs = _example("pserver")
    _set_env(_ranks(objs), "DISTCONV_JOB_ID", worker_env)
    _set_env(_shard(objs), "DISTCONV_JOB_ID", shard_env)
    _shard(objs)["args"] += shard_flags
    problems = manifest_problems(objs)
    assert len(problems) == 1 and words in problems[0], problems


def test_a_job_id_the_cluster_fills_in_is_not_judged():
    objs = _example("pserver")
    worker = _ranks(objs)
    worker["env"] = [e for e in worker["env"] if e["name"] != "DISTCONV_JOB_ID"]
    worker["env"].append(
        {"name": "DISTCONV_JOB_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    )
    assert manifest_problems(objs) == []


@pytest.mark.parametrize("role", ["ranks", "shard"])
def test_a_job_id_from_env_from_is_not_judged(role):
    """``envFrom`` (a ConfigMap's or Secret's keys) may set DISTCONV_JOB_ID: the job id it
    gives is the cluster's to know, not the default's (the check said 'job id 'local'
    (the default, without DISTCONV_JOB_ID)' for ranks that read it from a ConfigMap)."""
    objs = _example("pserver")
    container = _ranks(objs) if role == "ranks" else _shard(objs)
    _set_env(container, "DISTCONV_JOB_ID", None)
    container["envFrom"] = [{"configMapRef": {"name": "digits-ps-job"}}]
    assert manifest_problems(objs) == []


def test_a_job_id_set_beside_env_from_is_still_judged():
    """``env`` wins over ``envFrom`` in the kubelet: a value written there is the job id."""
    objs = _example("pserver")
    _set_env(_ranks(objs), "DISTCONV_JOB_ID", "other")
    _ranks(objs)["envFrom"] = [{"configMapRef": {"name": "digits-ps-job"}}]
    problems = manifest_problems(objs)
    assert len(problems) == 1 and "job id 'other' (DISTCONV_JOB_ID)" in problems[0], problems


@pytest.mark.parametrize(
    "flags, env",
    [
        (["--job", "digits-ps"], None),
        (["--job-i=digits-ps"], None),
        (["--job-id", "$(JOB)"], "digits-ps"),
    ],
)
def test_a_shard_s_job_id_is_read_as_the_shard_reads_it(flags, env):
    """``distconv pserver`` takes ``--job`` for ``--job-id`` (argparse's abbreviations), and the
    kubelet fills in a ``$(VAR)`` set in the container: the shard serves ``digits-ps``, not
    the default (the check said 'serves 'local' (the default...)' for ``--job digits-ps``)."""
    objs = _example("pserver")
    _set_env(_shard(objs), "DISTCONV_JOB_ID", None)
    _set_env(_shard(objs), "JOB", env)
    _shard(objs)["args"] += flags
    assert manifest_problems(objs) == []
    _ranks(objs)["args"] += ["--job-id", "other"]  # and a rank's other one is still named
    problems = manifest_problems(objs)
    assert len(problems) == 1 and "serves 'digits-ps' (--job-id)" in problems[0], problems


@pytest.mark.parametrize("flags", [["--job-id="], ["--job-id", ""], ["--job", ""]])
def test_a_shard_s_empty_job_id_is_none_given(flags):
    """``distconv pserver`` reads an empty ``--job-id`` as none given, as a worker does
    (:func:`~distconv.runtime.job_id_from`): the shard serves its ``DISTCONV_JOB_ID``, not the
    id '' the check said it would, refusing a manifest whose shards and workers agree."""
    objs = _example("pserver")
    _shard(objs)["args"] += flags
    assert manifest_problems(objs) == []
    _set_env(_shard(objs), "DISTCONV_JOB_ID", None)  # and without it, the default's
    problems = manifest_problems(objs)
    assert len(problems) == 1 and "serves 'local' (the default" in problems[0], problems


def _pod_templates(obj: dict) -> list[dict]:
    if obj["kind"] == "MPIJob":
        return [r["template"] for r in obj["spec"]["mpiReplicaSpecs"].values()]
    return [obj["spec"]["template"]] if "template" in obj.get("spec", {}) else []


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_container_of_the_cuda_image_given_no_gpu_is_shown_none(name):
    """NVIDIA's CUDA base image sets NVIDIA_VISIBLE_DEVICES=all, which the NVIDIA container
    runtime honours where the device plugin gave the container no GPU: a GPU job's shards and
    MPI launcher saw every GPU of their node, and so did every container of a CPU job run from
    the CUDA image. Every container given no GPU now says "void"; a rank given its GPUs leaves
    the variable to the plugin."""
    containers = [
        c for obj in _example(name) for t in _pod_templates(obj) for c in t["spec"]["containers"]
    ]
    assert containers
    for container in containers:
        has_gpu = "nvidia.com/gpu" in container["resources"]["limits"]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        if has_gpu:
            assert "NVIDIA_VISIBLE_DEVICES" not in env, container["name"]
        else:
            assert env.get("NVIDIA_VISIBLE_DEVICES") == "void", container["name"]
    assert manifest_problems(_example(name)) == []


@pytest.mark.parametrize("name", ["pserver", "pserver-gpu"])
def test_a_shard_is_given_only_the_environment_it_reads(name, tmp_path):
    """Of distconv's variables ``distconv pserver`` reads DISTCONV_JOB_ID, and DISTCONV_SHARD
    through ``--shard $(DISTCONV_SHARD)``; its keys come from ``--keys`` alone. The shards were
    also given DISTCONV_KEYS, DISTCONV_ROLE and DISTCONV_WORLD_SIZE, which it never read: whoever
    edited ``--keys`` out, trusting DISTCONV_KEYS, got a shard that refused to start."""
    (shards,) = [o for o in _example(name) if o["kind"] == "StatefulSet"]
    env = {e["name"]: e.get("value") for e in _main(shards)["env"]}
    assert {n for n in env if n.startswith("DISTCONV_")} == {"DISTCONV_JOB_ID", "DISTCONV_SHARD"}
    # a shard given DISTCONV_KEYS and no --keys is refused: the variable is not read
    argv = [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0", "--shard", "0",
            "--num-shards", "1", "--workers", "1"]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=30,
        env=child_env(DISTCONV_KEYS=str(tmp_path), DISTCONV_JOB_ID=env["DISTCONV_JOB_ID"]),
    )  # fmt: skip
    assert done.returncode != 0 and "pass --keys DIR" in done.stderr, done


@pytest.mark.parametrize(
    ("name", "device"),
    [("pserver", "cpu"), ("pserver-gpu", "gpu"), ("mpijob", "cpu"), ("mpijob-gpu", "gpu")],
)
def test_ranks_are_told_their_device_whatever_the_image_says(name, device):
    """The CUDA image sets DISTCONV_DEVICE=gpu: a CPU job run from it left the variable to the
    image, so its ranks asked for a GPU, and failed at start on a node without one. The ranks'
    environment (the workers', or under MPI the launcher's, which Hydra forwards) now names the
    device the job requested; a shard, which reads none, gets none."""
    told = {}
    for obj in _example(name):
        for template in _pod_templates(obj):
            for container in template["spec"]["containers"]:
                env = {e["name"]: e.get("value") for e in container.get("env", [])}
                told[container["name"]] = env.get("DISTCONV_DEVICE")
    ranks = {"worker": device, "pserver": None}
    if name.startswith("mpijob"):  # sshd's own env never reaches the ranks
        ranks = {"launcher": device, "worker": None}
    assert told == ranks
