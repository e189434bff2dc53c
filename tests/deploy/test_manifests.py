"""The manifests, validated offline: Kubernetes' own schemas (kubernetes-validate --strict), the
MPI operator's CRD schema (jsonschema), and the checks no schema makes; and each check shown to
catch a broken manifest."""

from __future__ import annotations

import copy
import functools
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
import yaml

from distconv.cli import build_parser
from distconv.deploy import dump_yaml, manifest_problems, render_manifests, write_manifests
from distconv.deploy.check import _templates
from distconv.deploy.render import EXAMPLE_TRAIN_ARGS, EXAMPLES, KEYS_DIR, WORK_DIR
from distconv.service import ServiceEndpoints
from tests.child_env import child_env

kubernetes_validate = pytest.importorskip("kubernetes_validate")

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD = Path(__file__).resolve().parent / "schemas" / "mpijob-crd.yaml"
#: the oldest Kubernetes the manifests target (the StatefulSet pod-index label is 1.28+)
KUBERNETES = "1.30.0"

#: the examples plus shapes the launcher renders: one worker, many shards, uneven MPI slots
CONFIGS = {
    **{name: {**kw, "train_args": EXAMPLE_TRAIN_ARGS} for name, kw in EXAMPLES.items()},
    "one-worker": dict(job_name="solo", workers=1, servers=1, image="reg.io/d:1", mode="async"),
    "many-shards": dict(job_name="wide", workers=16, servers=8, image="d:1", gpus=1),
    "mpi-slots": dict(job_name="pairs", workers=6, servers=0, image="d:1", slots_per_worker=2),
    "mpi-plain": dict(
        job_name="plain", workers=2, servers=0, image="d:1", train_args=["--epochs", "2"]
    ),
    "pserver-ipv6": dict(job_name="six", workers=2, servers=2, image="d:1", ipv6=True),
    "pserver-staleness": dict(
        job_name="stale", workers=2, servers=2, image="d:1", mode="async", max_staleness=0
    ),
}


def render(name: str) -> list[dict]:
    return render_manifests(**CONFIGS[name])


@functools.cache
def mpijob_schema() -> dict:
    """The CRD's v2beta1 schema, with unknown fields rejected wherever it lists properties."""
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v2beta1"]
    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
    _close(schema)
    return schema


def _close(node) -> None:
    if isinstance(node, dict):
        preserve = node.get("x-kubernetes-preserve-unknown-fields")
        if "properties" in node and "additionalProperties" not in node and not preserve:
            node["additionalProperties"] = False
        for value in node.values():
            _close(value)
    elif isinstance(node, list):
        for value in node:
            _close(value)


def validate(obj: dict) -> None:
    """Raise when ``obj`` breaks its schema: the CRD's for an MPIJob, Kubernetes' otherwise."""
    if obj["kind"] == "MPIJob":
        assert obj["apiVersion"] == "kubeflow.org/v2beta1"
        jsonschema.Draft7Validator(mpijob_schema()).validate(obj)
    else:
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def checked_mpijob(name: str) -> dict:
    """The MPIJob that configuration ``name`` renders, valid against the operator's CRD schema
    and with nothing ``manifest_problems`` finds."""
    (mpijob,) = render_manifests(**CONFIGS[name])
    validate(mpijob)
    assert manifest_problems([mpijob]) == []
    return mpijob


def mpijob_containers(mpijob: dict) -> tuple[dict, dict]:
    """An MPIJob's launcher container and its worker container."""
    replicas = mpijob["spec"]["mpiReplicaSpecs"]
    (launcher,) = replicas["Launcher"]["template"]["spec"]["containers"]
    (worker,) = replicas["Worker"]["template"]["spec"]["containers"]
    return launcher, worker


# -- rendered manifests pass ----------------------------------------------------------------


@pytest.mark.parametrize("name", CONFIGS)
def test_every_rendered_manifest_passes_its_schema_and_the_semantic_checks(name):
    objs = render(name)
    for obj in objs:
        validate(obj)
    assert manifest_problems(objs) == []
    # what kubectl reads back is what was rendered
    assert list(yaml.safe_load_all(dump_yaml(objs))) == objs


def test_parameter_server_job_has_its_three_objects_wired_together():
    service, sts, job = render("pserver")
    assert [o["kind"] for o in (service, sts, job)] == ["Service", "StatefulSet", "Job"]
    assert (
        service["spec"]["clusterIP"] == "None" and sts["spec"]["serviceName"] == "digits-ps-pserver"
    )
    (worker,) = job["spec"]["template"]["spec"]["containers"]
    assert worker["args"][:6] == [
        "distconv",
        "train",
        "--sync",
        "pserver",
        "--pservers",
        "digits-ps-pserver-0.digits-ps-pserver:5555,digits-ps-pserver-1.digits-ps-pserver:5555",
    ]
    assert worker["args"][-6:] == list(EXAMPLE_TRAIN_ARGS)
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 4
    (shard,) = sts["spec"]["template"]["spec"]["containers"]
    argv = shard["args"]
    assert argv[:4] == ["distconv", "pserver", "--bind", "0.0.0.0:5555"]
    assert argv[argv.index("--num-shards") + 1] == "2" and argv[argv.index("--workers") + 1] == "4"
    env = {e["name"]: e for e in shard["env"]}
    # the shard reads its index from --shard only; it never asks the runtime for a rank
    assert "DISTCONV_RANK_FROM_HOSTNAME" not in env
    assert "pod-index" in env["DISTCONV_SHARD"]["valueFrom"]["fieldRef"]["fieldPath"]


def test_mpijob_runs_mpirun_over_the_workers_slots():
    (mpijob,) = render("mpi-slots")
    spec = mpijob["spec"]
    assert spec["slotsPerWorker"] == 2 and spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 3
    (launcher,) = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    assert launcher["args"][:10] == [
        "mpirun", "-np", "6", "python", "-m", "mpi4py", "-m", "distconv", "train", "--sync",
    ]  # fmt: skip
    (worker,) = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert worker["args"][0] == "/usr/sbin/sshd" and "command" not in worker  # tini stays PID 1
    assert worker["resources"]["limits"] == {"cpu": "4", "memory": "8Gi"}  # two ranks' worth


def test_gpu_variant_limits_gpus_on_workers_only():
    service, sts, job = render("many-shards")
    (worker,) = job["spec"]["template"]["spec"]["containers"]
    (shard,) = sts["spec"]["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "nvidia.com/gpu" not in shard["resources"]["limits"]
    assert {"name": "DISTCONV_DEVICE", "value": "gpu"} in worker["env"]
    (mpijob,) = render("mpijob-gpu")
    replicas = mpijob["spec"]["mpiReplicaSpecs"]
    (gpu_worker,) = replicas["Worker"]["template"]["spec"]["containers"]
    (launcher,) = replicas["Launcher"]["template"]["spec"]["containers"]
    assert gpu_worker["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert "nvidia.com/gpu" not in launcher["resources"]["limits"]


def _rank_envs(objs: list[dict]) -> list[list[dict]]:
    """The env of every container that runs distconv train (an MPIJob's ranks get the
    launcher's, which Hydra forwards)."""
    return [
        c.setdefault("env", [])
        for obj in objs
        for _, template in _templates(obj)
        for c in template["spec"]["containers"]
        if "train" in c["args"]
    ]


@pytest.mark.parametrize("name", ["many-shards", "mpijob-gpu"])
def test_gpu_ranks_keep_cupys_kernel_cache_on_a_writable_volume(name):
    """CuPy compiles each kernel on first use and writes it under CUPY_CACHE_DIR, by default
    ~/.cupy in the image's home, which the pods' read-only root holds: the first operation of
    every GPU rank would fail with EROFS."""
    objs = render(name)
    for env in _rank_envs(objs):
        cache = {e["name"]: e.get("value") for e in env}["CUPY_CACHE_DIR"]
        assert cache.startswith("/tmp/"), cache  # the emptyDir every pod mounts there
    assert manifest_problems(objs) == []
    for env in _rank_envs(objs):
        env[:] = [e for e in env if e["name"] != "CUPY_CACHE_DIR"]
    (problem,) = {p.split(": ", 1)[1] for p in manifest_problems(objs)}
    assert problem == (
        "CuPy's kernel cache (CUPY_CACHE_DIR) /home/distconv/.cupy/kernel_cache is on no "
        "writable volume (the root file system is read-only)"
    )
    for env in _rank_envs(objs):  # a cache in memory writes nothing
        env.append({"name": "CUPY_CACHE_IN_MEMORY", "value": "1"})
    assert manifest_problems(objs) == []
    assert manifest_problems(render("pserver")) == []  # CPU ranks compile nothing


@pytest.mark.parametrize("value, in_memory", [("01", True), (" 1", True), ("true", False)])
def test_cupys_in_memory_cache_is_read_as_cupy_reads_it(value, in_memory):
    """CuPy reads CUPY_CACHE_IN_MEMORY as an integer equal to 1 ("01" is on, "true" off): a
    cache it keeps in memory needs no writable directory, and was refused as one on the root."""
    objs = render("pserver-gpu")
    for env in _rank_envs(objs):
        env[:] = [e for e in env if e["name"] != "CUPY_CACHE_DIR"]
        env.append({"name": "CUPY_CACHE_IN_MEMORY", "value": value})
    problems = manifest_problems(objs)
    assert (problems == []) == in_memory, problems


@pytest.mark.parametrize(
    "how, in_memory",
    [
        ("valueFrom", True),
        ("envFrom", True),
        ("$(VAR) defined before", True),
        ("$(VAR) defined after", False),
    ],
)
def test_an_in_memory_cache_the_cluster_fills_in_is_not_judged(how, in_memory):
    """A CUPY_CACHE_IN_MEMORY only the cluster knows (a ConfigMap's 1) may keep the cache in
    memory: it was read as off and the pod refused as caching on the read-only root. A
    $(VAR) is filled in as the kubelet fills a variable's value: from those before it
    only; one defined after it stays the text '$(VAR)', which CuPy reads as off."""
    objs = render("pserver-gpu")
    for env in _rank_envs(objs):
        env[:] = [e for e in env if e["name"] != "CUPY_CACHE_DIR"]
        flag = {"name": "CUPY_CACHE_IN_MEMORY", "value": "$(IN_MEMORY)"}
        one = {"name": "IN_MEMORY", "value": "1"}
        if how == "valueFrom":
            ref = {"configMapKeyRef": {"name": "cfg", "key": "in-memory"}}
            env.append({"name": "CUPY_CACHE_IN_MEMORY", "valueFrom": ref})
        elif how == "envFrom":  # a ConfigMap may set it: the cache named here is not judged
            env.append({"name": "CUPY_CACHE_DIR", "value": "/opt/cupy"})  # on the root
        else:
            env += [one, flag] if how.endswith("before") else [flag, one]
    if how == "envFrom":
        for obj in objs:
            for _, template in _templates(obj):
                for c in template["spec"]["containers"]:
                    if "train" in c["args"]:
                        c["envFrom"] = [{"configMapRef": {"name": "cfg"}}]
    problems = manifest_problems(objs)
    assert (problems == []) == in_memory, problems
    if not in_memory:
        assert "kernel cache (CUPY_CACHE_DIR)" in problems[0]


def _device_from_the_cluster(how: str, container: dict) -> None:
    """Have the cluster say where ``container``'s ranks train, as ``how`` does."""
    env = [e for e in container["env"] if e["name"] != "DISTCONV_DEVICE"]
    if how == "valueFrom":
        ref = {"configMapKeyRef": {"name": "cfg", "key": "device"}}
        env.append({"name": "DISTCONV_DEVICE", "valueFrom": ref})
    elif how == "envFrom":
        container["envFrom"] = [{"configMapRef": {"name": "cfg"}}]
    elif how == "$(VAR) of a ConfigMap":
        ref = {"configMapKeyRef": {"name": "cfg", "key": "device"}}
        env.append({"name": "DEV", "valueFrom": ref})
        container["args"] += ["--device", "$(DEV)"]
    else:  # a $(VAR) the manifest sets to gpu, as the kubelet fills it in
        env.append({"name": "DEV", "value": "gpu"})
        container["args"] += ["--device", "$(DEV)"]
    container["env"] = env


@pytest.mark.parametrize("how", ["valueFrom", "envFrom", "$(VAR) of a ConfigMap", "$(VAR)=gpu"])
def test_gpu_pods_whose_device_the_cluster_fills_in_are_not_called_idle(how):
    """A device the cluster fills in may be the GPU the pod requests: the idle-GPU refusal
    (--gpus 1 -- --device cpu) named these 'ranks train on the CPU' and the launcher's checks
    refused them, though the docs let what the cluster fills in pass."""
    objs = render("pserver-gpu")
    _device_from_the_cluster(how, _container(objs[2]))
    assert manifest_problems(objs) == []
    if how == "$(VAR)=gpu":  # read as the GPU it is: it needs a device of its own, as --device gpu
        _container(objs[2])["resources"]["limits"].pop("nvidia.com/gpu")
        (problem,) = manifest_problems(objs)
        assert "1 rank(s) per pod train on GPUs but the pod requests only 0" in problem
        _container(objs[2])["env"][-1]["value"] = "cpu"  # and a $(VAR) set to cpu as the CPU
        _container(objs[2])["resources"]["limits"]["nvidia.com/gpu"] = 1
        (problem,) = manifest_problems(objs)
        assert "the pod requests 1 nvidia.com/gpu but its ranks train on the CPU" in problem


@pytest.mark.parametrize("gpus, slots", [(1, 4), (1, 3), (1, 1)])
def test_gpus_are_per_rank_so_an_mpi_worker_pod_gets_one_set_per_slot(gpus, slots):
    """Local rank R uses CUDA device R: a pod of S ranks needs gpus x S devices."""
    objs = render_manifests(
        job_name="g", workers=2 * slots, servers=0, image="d:1", gpus=gpus, slots_per_worker=slots
    )
    (worker,) = _pod(objs[0], "Worker")["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == gpus * slots
    for obj in objs:
        validate(obj)
    assert manifest_problems(objs) == []


def test_milli_cpus_and_fractional_sizes_scale_with_the_slots(monkeypatch):
    """kubernetes.md invites editing WORKER_RESOURCES: "1500m" and "1.5Gi" render too."""
    import distconv.deploy.pod as pod

    monkeypatch.setitem(pod.WORKER_RESOURCES, "cpu", "1500m")
    monkeypatch.setitem(pod.WORKER_RESOURCES, "memory", "1.5Gi")
    objs = render_manifests(job_name="q", workers=6, servers=0, image="d:1", slots_per_worker=3)
    (worker,) = _pod(objs[0], "Worker")["containers"]
    assert worker["resources"]["requests"] == {"cpu": "4500m", "memory": "4.5Gi"}
    for obj in objs:
        validate(obj)


def test_keys_are_files_from_the_secret_never_environment_values():
    sides = {"StatefulSet": "server", "Job": "worker"}
    for obj in render("pserver"):
        text = dump_yaml([obj])
        if obj["kind"] == "Service":
            continue
        pod = obj["spec"]["template"]["spec"]
        secret = f"digits-ps-{sides[obj['kind']]}-keys"  # shards and workers: their own keys
        assert {"name": "keys", "secret": {"secretName": secret, "defaultMode": 0o440}} in (
            pod["volumes"]
        )
        assert "secretKeyRef" not in text and "secretRef" not in text


def _distconv_argv(container: dict) -> list[str] | None:
    """What follows ``distconv`` in a container's argv, ``$(VAR)`` filled from its env."""
    argv = [str(a) for a in (*container.get("command", []), *container.get("args", []))]
    if "distconv" not in argv:
        return None
    env = {e["name"]: e.get("value", "0") for e in container.get("env", [])}
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in argv][
        argv.index("distconv") + 1 :
    ]


@pytest.mark.parametrize("name", CONFIGS)
def test_every_container_command_parses_with_the_real_distconv_parser(name):
    parser = build_parser()
    seen = set()
    for obj in render(name):
        for _, template in _templates(obj):
            for container in template["spec"]["containers"]:
                argv = _distconv_argv(container)
                if argv is None:
                    continue
                args = parser.parse_args(argv)  # SystemExit on any flag distconv lacks
                seen.add(argv[0])
                anywhere = "::" if CONFIGS[name].get("ipv6") else "0.0.0.0"
                assert args.health_port == 8080 and args.health_host == anywhere
                if argv[0] == "pserver":  # every interface, as the kubelet and workers come
                    assert args.bind == ("[::]:5555" if anywhere == "::" else "0.0.0.0:5555")
                if argv[0] == "train":
                    assert args.resume == "auto" and args.out.startswith("/var/lib/distconv/")
    assert seen == ({"train"} if CONFIGS[name]["servers"] == 0 else {"train", "pserver"})


@pytest.mark.parametrize("name", ["pserver", "pserver-gpu"])
def test_startup_probes_wait_for_readiness_not_for_health(name):
    """A worker's startup probe waits for its parameters (/readyz, 200 once it has them). A
    shard's asks /healthz, which turns 503 once its job failed, seeded or not: on /readyz a shard
    failed before its seed held liveness off for the whole window and was never restarted."""
    probed = {}
    for obj in render(name):
        for where, template in _templates(obj):
            for container in template["spec"]["containers"]:
                startup = container["startupProbe"]  # shards and workers alike have one
                seconds = startup["periodSeconds"] * startup["failureThreshold"]
                probed[where] = (startup["httpGet"]["path"], seconds)
    job = name.replace("pserver", "digits-ps")
    assert probed == {
        f"StatefulSet {job}-pserver": ("/healthz", 60),
        f"Job {job}-worker": ("/readyz", 1200),
    }


def test_no_mpijob_container_waits_on_a_startup_probe():
    """sshd runs long before any rank and mpirun runs no training: nothing to start up."""
    (mpijob,) = render("mpijob")
    containers = [c for _, t in _templates(mpijob) for c in t["spec"]["containers"]]
    assert [c["name"] for c in containers] == ["launcher", "worker"]
    assert all("startupProbe" not in c and "readinessProbe" not in c for c in containers)


def test_mpi_worker_pods_wait_for_their_ranks_and_are_not_gated():
    (mpijob,) = render("mpijob")
    replicas = mpijob["spec"]["mpiReplicaSpecs"]
    (worker,) = replicas["Worker"]["template"]["spec"]["containers"]
    assert "readinessProbe" not in worker and "startupProbe" not in worker
    assert worker["lifecycle"]["preStop"]["exec"]["command"][0] == "/bin/sh"
    # a liveness kill restarts sshd in its pod: under Never the pod stayed Failed for good
    assert "livenessProbe" in worker and replicas["Worker"]["restartPolicy"] == "OnFailure"
    (launcher,) = replicas["Launcher"]["template"]["spec"]["containers"]
    for container in (launcher, worker):
        assert container["workingDir"] == "/var/lib/distconv/run"
        assert {"name": "work", "mountPath": "/var/lib/distconv/run"} in container["volumeMounts"]


def test_mpi_worker_liveness_judges_only_running_ranks(tmp_path):
    """The exec probe, run for real: passes with no rank, fails on a stalled one."""
    (mpijob,) = render("mpijob")
    (worker,) = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    script = worker["livenessProbe"]["exec"]["command"][-1]
    assert "range(8080, 8081)" in script  # one slot: one rank's port

    def run(port: int) -> int:
        code = script.replace("range(8080, 8081)", f"range({port}, {port + 1})")
        return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode

    service = ServiceEndpoints(role="worker", rank=0, stall_seconds=0.05)
    port = service.start("127.0.0.1", 0)
    try:
        time.sleep(0.2)  # no beat for longer than stall_seconds: the rank is stalled
        assert run(port) == 1
        service.beat(1)
        service.stall_seconds = 60.0
        assert run(port) == 0
    finally:
        service.close()
    assert run(port) == 0  # no rank listens: nothing to judge


def test_the_checked_in_examples_equal_a_fresh_render(tmp_path):
    write_manifests([], tmp_path)  # an empty job writes nothing
    fresh = tmp_path / "k8s"
    result = subprocess.run(
        [sys.executable, "-m", "distconv.deploy", str(fresh)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    written = sorted(Path(line).relative_to(fresh) for line in result.stdout.split())
    checked_in = sorted(
        p.relative_to(REPO_ROOT / "k8s") for p in (REPO_ROOT / "k8s").rglob("*.yaml")
    )
    assert written == checked_in, "run `python -m distconv.deploy k8s` to refresh k8s/"
    for rel in written:
        assert (REPO_ROOT / "k8s" / rel).read_text() == (fresh / rel).read_text(), rel


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_checked_in_examples_pass_the_checks_as_read_from_disk(example):
    objs = [
        yaml.safe_load(p.read_text()) for p in sorted((REPO_ROOT / "k8s" / example).glob("*.yaml"))
    ]
    assert objs
    for obj in objs:
        validate(obj)
    assert manifest_problems(objs) == []


# -- broken manifests are caught ------------------------------------------------------------


def _container(obj: dict, role: str | None = None) -> dict:
    spec = obj["spec"]
    template = spec["mpiReplicaSpecs"][role]["template"] if role else spec["template"]
    return template["spec"]["containers"][0]


SCHEMA_BREAKS = {
    "core: unknown container field": ("pserver", 2, lambda o: _container(o).update(imagePull="x")),
    "core: replicas is a string": ("pserver", 1, lambda o: o["spec"].update(replicas="two")),
    "core: port out of type": (
        "pserver",
        0,
        lambda o: o["spec"]["ports"][0].update(port="ps"),
    ),
    "mpijob: unknown spec field": ("mpijob", 0, lambda o: o["spec"].update(slotsPerWorkers=1)),
    "mpijob: unknown container field": (
        "mpijob",
        0,
        lambda o: _container(o, "Worker").update(imagePull="x"),
    ),
    "mpijob: bad implementation": (
        "mpijob",
        0,
        lambda o: o["spec"].update(mpiImplementation="LAM"),
    ),
    "mpijob: replicas is a string": (
        "mpijob",
        0,
        lambda o: o["spec"]["mpiReplicaSpecs"]["Worker"].update(replicas="3"),
    ),
}


@pytest.mark.parametrize("case", SCHEMA_BREAKS)
def test_a_schema_break_is_caught(case):
    name, index, breaks = SCHEMA_BREAKS[case]
    obj = copy.deepcopy(render(name)[index])
    validate(obj)
    breaks(obj)
    with pytest.raises(jsonschema.ValidationError):
        validate(obj)


def _env_set(container: dict, name: str, value: str) -> None:
    for var in container["env"]:
        if var["name"] == name:
            var["value"] = value


def _arg_set(container: dict, flag: str, value: str) -> None:
    container["args"][container["args"].index(flag) + 1] = value


def _pod(obj: dict, role: str | None = None) -> dict:
    spec = obj["spec"]
    return (spec["mpiReplicaSpecs"][role] if role else spec)["template"]["spec"]


# (example, object index, mutation, words the problem must contain)
SEMANTIC_BREAKS = {
    "job restarts always": (
        "pserver", 2, lambda o: _pod(o).update(restartPolicy="Always"), "restartPolicy",
    ),
    "mpi launcher restarts always": (
        "mpijob", 0, lambda o: o["spec"]["mpiReplicaSpecs"]["Launcher"].update(
            restartPolicy="Always"), "Launcher: restartPolicy",
    ),
    "serviceName names nothing": (
        "pserver", 1, lambda o: o["spec"].update(serviceName="other"), "names no Service",
    ),
    "service is not headless": (
        "pserver", 0, lambda o: o["spec"].update(clusterIP="10.0.0.1"), "not headless",
    ),
    "selector misses the pods": (
        "pserver", 0, lambda o: o["spec"]["selector"].update(
            {"app.kubernetes.io/component": "worker"}), "selector does not match",
    ),
    "subdomain names nothing": (
        "pserver", 2, lambda o: _pod(o).update(subdomain="nowhere"), "subdomain 'nowhere'",
    ),
    "-np beyond the slots": (
        "mpijob", 0, lambda o: _arg_set(_container(o, "Launcher"), "-np", "5"), "-np 5 exceeds",
    ),
    "-np not a number": (
        "mpijob", 0, lambda o: _arg_set(_container(o, "Launcher"), "-np", "all"),
        "-np with a number",
    ),
    # Hydra starts as many ranks as it finds slots for on -np 0, and refuses a repeated -np
    # ("duplicate setting: np"): the job never starts
    "-np 0": (
        "mpijob", 0, lambda o: _arg_set(_container(o, "Launcher"), "-np", "0"),
        "-np with a number, got '0'",
    ),
    "-np given twice": (
        "mpijob", 0,
        lambda o: _container(o, "Launcher")["args"].__setitem__(slice(1, 1), ["-np", "1"]),
        "mpirun refuses -np given 2 times",
    ),
    "a shard missing from --pservers": (
        "pserver", 2, lambda o: _arg_set(_container(o), "--pservers",
            "digits-ps-pserver-0.digits-ps-pserver:5555"), "--pservers",
    ),
    # distconv's own flags are argparse's: the last of a repeated one is the one it keeps
    "a later --pservers wins": (
        "pserver", 2, lambda o: _container(o)["args"].extend(
            ["--pservers", "digits-ps-pserver-0.digits-ps-pserver:5555"]),
        "not the shards' DNS names",
    ),
    "a later --bind wins": (
        "pserver", 1, lambda o: _container(o)["args"].extend(["--bind", "0.0.0.0:6000"]),
        "not the shards' DNS names",
    ),
    "a later --num-shards wins": (
        "pserver", 1, lambda o: _container(o)["args"].extend(["--num-shards", "3"]),
        "--num-shards 3 but the StatefulSet has 2 replicas",
    ),
    "a later --workers wins": (
        "pserver", 1, lambda o: _container(o)["args"].extend(["--workers", "9"]),
        "--workers 9 but",
    ),
    "a later --keys wins": (
        "pserver", 2, lambda o: _container(o)["args"].extend(["--keys", "/elsewhere"]),
        "DISTCONV_KEYS must be '/elsewhere'",
    ),
    "a later --health-port wins": (
        "pserver", 2, lambda o: _container(o)["args"].extend(["--health-port", "1"]),
        "--health-port 1 is no container port named health",
    ),
    "shards out of order": (
        "pserver", 2, lambda o: _arg_set(_container(o), "--pservers",
            "digits-ps-pserver-1.digits-ps-pserver:5555,digits-ps-pserver-0.digits-ps-pserver:5555"),
        "not the shards' DNS names",
    ),
    "DISTCONV_PSERVERS disagrees": (
        "pserver", 2, lambda o: _env_set(_container(o), "DISTCONV_PSERVERS", "x:1"),
        "DISTCONV_PSERVERS",
    ),
    "more shards than --num-shards": (
        "pserver", 1, lambda o: o["spec"].update(replicas=3), "--num-shards 2",
    ),
    "shards expect other worker count": (
        "pserver", 2, lambda o: o["spec"].update(completions=3), "--workers 4",
    ),
    "world size disagrees": (
        "pserver", 2, lambda o: _env_set(_container(o), "DISTCONV_WORLD_SIZE", "3"),
        "DISTCONV_WORLD_SIZE",
    ),
    # the ranks take theirs from the Job index, and refuse to start without it
    "world size not set": (
        "pserver", 2, lambda o: _container(o).update(
            env=[v for v in _container(o)["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]),
        "DISTCONV_WORLD_SIZE is not set; every rank would refuse to start (the Job runs 4)",
    ),
    "no readiness probe": (
        "pserver", 1, lambda o: _container(o).pop("readinessProbe"), "readinessProbe",
    ),
    "liveness on the wrong path": (
        "pserver", 2, lambda o: _container(o)["livenessProbe"]["httpGet"].update(
            path="/readyz"), "livenessProbe must GET /healthz",
    ),
    "mpi liveness judges no rank": (
        "mpijob", 0, lambda o: _container(o, "Worker")["livenessProbe"].update(
            exec={"command": ["true"]}), "running ranks' /healthz",
    ),
    "--health-port is not served": (
        "pserver", 2, lambda o: _arg_set(_container(o), "--health-port", "9999"),
        "--health-port 9999",
    ),
    "no cpu limit": (
        "pserver", 2, lambda o: _container(o)["resources"]["limits"].pop("cpu"),
        "resources.limits.cpu",
    ),
    "runs as root": (
        "mpijob", 0, lambda o: _pod(o, "Worker")["securityContext"].update(runAsNonRoot=False),
        "runAsNonRoot",
    ),
    "privilege escalation": (
        "pserver", 1, lambda o: _container(o)["securityContext"].update(
            allowPrivilegeEscalation=True), "allowPrivilegeEscalation",
    ),
    "no time to checkpoint": (
        "pserver", 1, lambda o: _pod(o).update(terminationGracePeriodSeconds=30), "< 60 s",
    ),
    "keys from the environment": (
        "pserver", 2, lambda o: _container(o)["env"].append({"name": "KEY", "valueFrom": {
            "secretKeyRef": {"name": "digits-ps-keys", "key": "server.key"}}}),
        "comes from a Secret",
    ),
    "keys not mounted": (
        "pserver", 1, lambda o: _container(o)["volumeMounts"].pop(1),
        f"--keys {KEYS_DIR} is not a mounted Secret",
    ),
    "DISTCONV_KEYS elsewhere": (
        "pserver", 2, lambda o: _env_set(_container(o), "DISTCONV_KEYS", "/keys"), "DISTCONV_KEYS",
    ),
    "label missing": (
        "pserver", 0, lambda o: o["metadata"]["labels"].pop("app.kubernetes.io/instance"),
        "label app.kubernetes.io/instance is missing",
    ),
    "a worker restart starts over": (
        "pserver", 2, lambda o: _arg_set(_container(o), "--resume", "never"), "--resume auto",
    ),
    "mpi ranks start over": (
        "mpijob", 0, lambda o: _arg_set(_container(o, "Launcher"), "--resume", "never"),
        "--resume auto",
    ),
    "workers get the server's secret key": (
        "pserver", 2, lambda o: _pod(o)["volumes"][1]["secret"].update(
            secretName="digits-ps-server-keys"), "must not hold the server's secret key",
    ),
    "startup probe passes at once": (
        "pserver", 2, lambda o: _container(o)["startupProbe"]["httpGet"].update(path="/healthz"),
        "startupProbe must GET /readyz",
    ),
    "a failed unseeded shard is never restarted": (
        "pserver", 1, lambda o: _container(o)["startupProbe"]["httpGet"].update(path="/readyz"),
        "a shard's startupProbe must GET /healthz",
    ),
    "mpi worker pod failed for good by its liveness": (
        "mpijob", 0, lambda o: o["spec"]["mpiReplicaSpecs"]["Worker"].update(restartPolicy="Never"),
        "Worker: restartPolicy Never with a livenessProbe",
    ),
    "mpi worker restart policy unset": (
        "mpijob", 0, lambda o: o["spec"]["mpiReplicaSpecs"]["Worker"].pop("restartPolicy"),
        "Worker: restartPolicy Never (unset) with a livenessProbe",
    ),
    # the operator's validation takes Never or OnFailure on every replica, and leaves an MPIJob
    # with any other unstarted, with only an event saying why
    "mpi worker restart policy the operator refuses": (
        "mpijob", 0,
        lambda o: o["spec"]["mpiReplicaSpecs"]["Worker"].update(restartPolicy="Always"),
        "Worker: restartPolicy must be Never or OnFailure, got 'Always'",
    ),
    "mpi worker restart policy ExitCode": (
        "mpijob", 0,
        lambda o: o["spec"]["mpiReplicaSpecs"]["Worker"].update(restartPolicy="ExitCode"),
        "Worker: restartPolicy must be Never or OnFailure, got 'ExitCode'",
    ),
    "mpi run directory not writable": (
        "mpijob", 0, lambda o: _container(o, "Worker")["volumeMounts"].pop(),
        "is on no writable volume",
    ),
    "--out on the read-only root": (
        "pserver", 2, lambda o: _arg_set(_container(o), "--out", "/opt/run"),
        "--out /opt/run is on no writable volume",
    ),
    "sshd gated on readiness": (
        "mpijob", 0, lambda o: _container(o, "Worker").update(readinessProbe={}),
        "no readinessProbe on sshd",
    ),
    "no preStop on mpi workers": (
        "mpijob", 0, lambda o: _container(o, "Worker").pop("lifecycle"), "preStop",
    ),
    "preStop waits for sshd": (  # "distconv" is in sshd's own command line: waits for ever
        "mpijob", 0, lambda o: _container(o, "Worker")["lifecycle"]["preStop"]["exec"].update(
            command=["/bin/sh", "-c", "while grep -qs '[d]istconv' /proc/[0-9]*/cmdline; do "
                     "sleep 1; done"]), "preStop hook must wait while the ranks",
    ),
    "mpi ranks share one gpu": (
        "mpijob-gpu", 0, lambda o: _container(o, "Worker")["resources"]["limits"].update(
            {"nvidia.com/gpu": 1}), "4 rank(s) per pod train on GPUs but the pod requests only 1",
    ),
    "gpu worker without a gpu": (
        "pserver-gpu", 2, lambda o: _container(o)["resources"]["limits"].pop("nvidia.com/gpu"),
        "Job digits-ps-gpu-worker: 1 rank(s) per pod train on GPUs but the pod requests only 0",
    ),
    "gpu pods training on the cpu": (  # --gpus 1 -- --device cpu: devices requested, idle
        "pserver-gpu", 2, lambda o: _container(o)["args"].extend(["--device", "cpu"]),
        "Job digits-ps-gpu-worker: the pod requests 1 nvidia.com/gpu but its ranks train on the "
        "CPU",
    ),
    "mpi gpu pods training on the cpu": (
        "mpijob-gpu", 0, lambda o: _container(o, "Launcher")["args"].extend(["--dev", "cpu"]),
        "the pod requests 4 nvidia.com/gpu but its ranks train on the CPU",
    ),
    "mpi ranks given a parameter-server flag": (
        "mpijob", 0, lambda o: _container(o, "Launcher")["args"].extend(["--push-kb", "0"]),
        "--push-kb is for --sync pserver, and this run uses mpi sync",
    ),
    "pserver workers given an allreduce flag": (
        "pserver", 2, lambda o: _container(o)["args"].append("--grad-dtype=bfloat16"),
        "--grad-dtype is for --sync mpi, and this run uses pserver sync",
    ),
    "an abbreviated flag for another transport": (
        "mpijob", 0, lambda o: _container(o, "Launcher")["args"].extend(["--push", "0"]),
        "--push-kb is for --sync pserver, and this run uses mpi sync",
    ),
    "a later --out, abbreviated, wins": (
        "pserver", 2, lambda o: _container(o)["args"].extend(["--ou", "/opt/run"]),
        "--out /opt/run is on no writable volume",
    ),
    "--overwrite beside --resume auto": (
        "pserver", 2, lambda o: _container(o)["args"].append("--ov"),
        "container worker: every rank would refuse --overwrite beside --resume",
    ),
    "a flag distconv train does not take": (
        "mpijob", 0, lambda o: _container(o, "Launcher")["args"].append("--bogus=1"),
        "Launcher container launcher: distconv train takes no --bogus: every rank would refuse",
    ),
    "an abbreviation of two flags": (
        "pserver", 2, lambda o: _container(o)["args"].extend(["--p", "1"]),
        "--p could be any of --pservers, --push-kb: every rank would refuse it",
    ),
    "--dev gpu on cpu pods": (
        "mpijob", 0, lambda o: _container(o, "Launcher")["args"].extend(["--dev", "gpu"]),
        "MPIJob digits-mpi Worker: 1 rank(s) per pod train on GPUs",
    ),
    "--device gpu on cpu pods": (
        "mpijob", 0, lambda o: _container(o, "Launcher")["args"].extend(["--device", "gpu"]),
        "MPIJob digits-mpi Worker: 1 rank(s) per pod train on GPUs",
    ),
}  # fmt: skip


def _worker_args(objs):
    return objs[2]["spec"]["template"]["spec"]["containers"][0]["args"]


def test_flags_are_compared_with_the_sync_the_ranks_run():
    """The last --sync (argparse keeps it), and none where Kubernetes fills it in."""
    objs = copy.deepcopy(render("pserver"))
    args = _worker_args(objs)
    assert args[2:4] == ["--sync", "pserver"]
    args[3] = "$(SYNC)"  # expanded from the container's environment
    assert manifest_problems(objs) == []
    args[2:4] = ["--sync=mpi"]
    args += ["--sync", "pserver", "--push-kb", "0"]
    assert manifest_problems(objs) == []
    args += ["--sync=mpi"]
    assert "--push-kb is for --sync pserver, and this run uses mpi sync" in "; ".join(
        manifest_problems(objs)
    )


def test_mpirun_np_with_two_dashes_is_read_as_hydra_reads_it():
    """Hydra takes --np 2 as -np 2: the check called it 'mpirun needs -np with a number'."""
    objs = copy.deepcopy(render("mpijob"))
    args = _container(objs[0], "Launcher")["args"]
    args[args.index("-np")] = "--np"
    assert manifest_problems(objs) == []


@pytest.mark.parametrize(
    "name, index, role, out, refused",
    [
        ("pserver", 2, None, WORK_DIR, False),  # the mount point itself is on the volume
        ("pserver", 2, None, WORK_DIR + "/", False),
        ("mpijob", 0, "Launcher", WORK_DIR, False),
        ("pserver", 2, None, WORK_DIR + "/../../../opt/run", True),  # ".." leaves the volume
        ("pserver", 2, None, "/tmp/../opt/run", True),
        ("pserver", 2, None, "../../../opt/run", True),  # relative to the workingDir
        ("mpijob", 0, "Launcher", "/tmp/../opt/run", True),
    ],
)
def test_out_is_judged_where_the_kernel_resolves_it(name, index, role, out, refused):
    """--out at a volume's mount point was refused as on the read-only root, and one that
    climbs out of a volume with ".." was let through."""
    objs = copy.deepcopy(render(name))
    _arg_set(_container(objs[index], role), "--out", out)
    problems = "; ".join(manifest_problems(objs))
    assert ("is on no writable volume" in problems) is refused, problems


@pytest.mark.parametrize("case", SEMANTIC_BREAKS)
def test_a_semantic_break_is_caught(case):
    name, index, breaks, words = SEMANTIC_BREAKS[case]
    objs = copy.deepcopy(render(name))
    breaks(objs[index])
    problems = manifest_problems(objs)
    assert any(words in p for p in problems), problems


@pytest.mark.parametrize(
    "var",
    [
        {
            "name": "DISTCONV_WORLD_SIZE",
            "valueFrom": {"configMapKeyRef": {"name": "c", "key": "n"}},
        },
        {"name": "DISTCONV_WORLD_SIZE", "value": " 04"},  # the ranks read it as 4
    ],
)
def test_a_world_size_the_cluster_fills_in_or_the_ranks_read_alike_passes(var):
    """As for --world-size: a value only the cluster knows is not judged (it was named as
    "DISTCONV_WORLD_SIZE None"), and one the ranks read as the Job's completions agrees."""
    objs = copy.deepcopy(render("pserver"))
    container = _container(objs[2])
    container["env"] = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    container["env"].append(var)
    assert manifest_problems(objs) == []


@pytest.mark.parametrize("value", ["$(RANKS)", "$$(RANKS)"])
def test_a_world_size_of_a_variable_nothing_defines_is_refused(value):
    """No variable, Service or ConfigMap fills in ``$(RANKS)``: the ranks read the text and
    refuse it ("DISTCONV_WORLD_SIZE must be an integer"); it passed as a value the cluster
    knows."""
    objs = copy.deepcopy(render("pserver"))
    container = _container(objs[2])
    container["env"] = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    container["env"].append({"name": "DISTCONV_WORLD_SIZE", "value": value})
    (problem,) = manifest_problems(objs)
    assert "DISTCONV_WORLD_SIZE '$(RANKS)' reaches the ranks as written" in problem


#: the shards' names in the "pserver" example, as its workers' --pservers lists them
SHARDS = "digits-ps-pserver-0.digits-ps-pserver:5555,digits-ps-pserver-1.digits-ps-pserver:5555"


@pytest.mark.parametrize(
    "var, problem",
    [
        ({"name": "PS", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}, None),
        ({"name": "PS", "value": SHARDS}, None),
        ({"name": "PS", "value": SHARDS.split(",")[0]}, "is not the shards' DNS names"),
        ({"name": "OTHER", "value": SHARDS}, "'$(PS)' is not the shards' DNS names"),
    ],
)
def test_pservers_are_compared_as_the_kubelet_fills_them_in(var, problem):
    """A ``--pservers $(PS)`` (or DISTCONV_PSERVERS) is read as the kubelet passes it, as the
    shards' own arguments are: it was compared as the text "$(PS)" and always refused."""
    objs = copy.deepcopy(render("pserver"))
    container = _container(objs[2])
    _arg_set(container, "--pservers", "$(PS)")
    _env_set(container, "DISTCONV_PSERVERS", "$(PS)")
    container["env"].insert(0, var)  # the kubelet fills in only a variable defined before
    problems = manifest_problems(objs)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 2 and all(problem in p for p in problems), problems


def _qualified(suffix: str, port: str = "5555") -> str:
    return ",".join(f"{a.rsplit(':', 1)[0]}{suffix}:{port}" for a in SHARDS.split(","))


@pytest.mark.parametrize(
    "pservers, same",
    [
        (_qualified(".default.svc.cluster.local"), True),  # the name a cluster's DNS holds too
        (_qualified(".team-a.svc"), True),
        (_qualified(".team-a"), True),
        (_qualified(".default.svc.cluster.local", port="6000"), False),
        (_qualified("s"), False),  # another Service: digits-ps-pservers
        (_qualified(".Default"), False),  # no namespace has capitals
        (_qualified("..svc"), False),
    ],
)
def test_a_shard_name_qualified_with_its_namespace_is_the_same_shard(pservers, same):
    """``<pod>.<service>.<namespace>.svc.<domain>`` reaches the pod ``<pod>.<service>`` does:
    it was refused as "not the shards' DNS names"."""
    objs = copy.deepcopy(render("pserver"))
    _arg_set(_container(objs[2]), "--pservers", pservers)
    problems = manifest_problems(objs)
    assert (problems == []) is same, problems
    if not same:
        assert "is not the shards' DNS names" in problems[0]


@pytest.mark.parametrize("namespace", [None, "team-a", "team-b"])
def test_a_qualified_shard_name_must_name_the_shards_namespace_where_it_is_written(namespace):
    """The shards' StatefulSet in namespace team-a: ``<pod>.<service>.team-b.svc`` names pods
    of the same names in another namespace (other shards, or none), and passed for these. A
    manifest that leaves the namespace to ``kubectl -n`` may mean any."""
    objs = copy.deepcopy(render("pserver"))
    if namespace is not None:
        objs[1]["metadata"]["namespace"] = namespace
    _arg_set(_container(objs[2]), "--pservers", _qualified(".team-a.svc"))
    problems = manifest_problems(objs)
    assert (problems == []) is (namespace in (None, "team-a")), problems
    if problems:
        assert "is not the shards' DNS names" in problems[0]


@pytest.mark.parametrize("after", [False, True])
def test_a_pservers_variable_is_filled_in_only_from_those_defined_before_it(after):
    """The kubelet fills in a variable's ``$(VAR)`` from the variables defined before it only
    (a command line's from all of them): one defined after it stays "$(PS)", which every rank
    refuses as no host:port, and the check passed it."""
    objs = copy.deepcopy(render("pserver"))
    container = _container(objs[2])
    at = container["args"].index("--pservers")
    del container["args"][at : at + 2]  # the ranks read DISTCONV_PSERVERS
    _env_set(container, "DISTCONV_PSERVERS", "$(PS)")
    ps = {"name": "PS", "value": SHARDS}
    container["env"] = [*container["env"], ps] if after else [ps, *container["env"]]
    problems = manifest_problems(objs)
    if after:
        (problem,) = problems
        assert "DISTCONV_PSERVERS '$(PS)' is not the shards' DNS names" in problem
    else:
        assert problems == []


# -- bad arguments ----------------------------------------------------------------------------

GOOD = dict(job_name="j", workers=2, servers=1, image="d:1")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"job_name": "Bad_Name"}, "--job-name must be a DNS label"),
        ({"job_name": "a" * 41}, "--job-name must be at most 40 characters"),
        ({"workers": 0}, "--workers must be an integer >= 1, got 0"),
        ({"servers": -1}, "--servers must be an integer >= 0, got -1"),
        ({"gpus": True}, "--gpus must be an integer >= 0, got True"),
        ({"slots_per_worker": 0}, "--slots-per-worker must be an integer >= 1"),
        ({"image": "my image"}, "--image must be a non-empty image reference"),
        ({"mode": "bsp"}, "--mode must be one of ('sync', 'async'), got 'bsp'"),
        ({"train_args": "--epochs 3"}, "the train arguments must be a sequence of strings"),
        ({"train_args": ["--health-port=9"]}, "after -- must leave --health-port=9 to the"),
        ({"train_args": ["--epochs", "3", "--sync", "local"]}, "must leave --sync to the"),
        ({"train_args": ["--re=never"]}, "must leave --re=never (--resume) to the deployment"),
        ({"train_args": ["--syn", "mpi"]}, "must leave --syn (--sync) to the deployment"),
        # the deployment sets no --overwrite: it sets --resume auto, which excludes it
        ({"train_args": ["--overwrite"]}, "--overwrite after --: every rank would refuse it"),
        ({"train_args": ["--overw"]}, "--overwrite after --: every rank would refuse it beside"),
        # set in the pods' environment, which a flag would win over (the library
        # rendered them, only distconv-launch k8s refused them)
        ({"train_args": ["--ra", "0"]}, "--rank after --: each worker's rank comes from its"),
        ({"train_args": ["--world-size=3"]}, "--world-size after --: the deployment sets the"),
        ({"servers": 0, "train_args": ["--job-id", "x"]}, "--job-id after --: the deployment"),
        ({"train_args": ["--bogus"]}, "takes no --bogus (the train arguments after --)"),
        ({"train_args": ["--p", "1"]}, "--p could be any of --pservers, --push-kb"),
        ({"mpi": True}, "an MPIJob (--mpi) runs allreduce without shards, not --servers 1"),
        ({"servers": 0, "mpi": False}, "a parameter-server job needs --servers >= 1"),
        ({"servers": 0, "ipv6": True}, "--ipv6 renders parameter-server jobs only, not an MPIJob"),
        (
            {"servers": 0, "workers": 2, "slots_per_worker": 4},
            "--workers 2 is not a multiple of --slots-per-worker 4",
        ),
        (
            {"servers": 0, "workers": 6, "slots_per_worker": 4},
            "--workers 6 is not a multiple of --slots-per-worker 4",
        ),
    ],
)
def test_bad_arguments_name_the_cause(change, message):
    with pytest.raises(ValueError, match=__import__("re").escape(message)):
        render_manifests(**{**GOOD, **change})


def test_abbreviated_train_args_are_rendered_in_full_and_the_users_out_kept():
    mine = f"--ou={WORK_DIR}/mine"
    objs = render_manifests(**GOOD, train_args=["--ep", "3", mine, "--lr", "0.1"])
    args = _worker_args(objs)
    assert args[-5:] == ["--epochs", "3", f"--out={WORK_DIR}/mine", "--lr", "0.1"]
    assert [a for a in args if a.startswith("--ou")] == [f"--out={WORK_DIR}/mine"]
    assert manifest_problems(objs) == []


def test_yaml_output_reads_back_every_awkward_string():
    awkward = "yes No on null ~ 1e3 0o17 08 - #c 'q' \"dq\" ünï {x} [y] *ref &a @ :".split()
    awkward += ["", "a: b", "- x", "tab\there", "line\nbreak", " lead", "trail "]
    obj = {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {s or "e": s for s in awkward}}
    obj["list"] = [[1, [2, {}]], {"a": []}, True, False, 0, -3]
    text = dump_yaml([obj, obj])
    assert list(yaml.safe_load_all(text)) == [obj, obj]
    with pytest.raises(TypeError, match="cannot write float 0.5"):
        dump_yaml([{"x": 0.5}])
    # a lone surrogate (undecoded bytes) has no UTF-8 form and no YAML escape
    with pytest.raises(ValueError, match="not valid text"):
        dump_yaml([{"x": "runs/\udcff"}])


#: a character past U+FFFF (JSON would write it as a surrogate pair) beside ones within it
ASTRAL = ["runs/\U0001f600", "a\U0010ffffb", "\u00e9\U0001d11e\t"]


@pytest.mark.timeout(60)
def test_yaml_output_reads_back_characters_past_the_basic_plane(tmp_path):
    """A surrogate pair escape is refused by libyaml and by Go's YAML, which kubectl uses
    ("found invalid Unicode character escape code"), and PyYAML reads it as two characters."""
    objs = render_manifests(**{**CONFIGS["one-worker"], "train_args": ["--out", ASTRAL[0]]})
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    objs.append({**config, "data": {f"k{i}": s for i, s in enumerate(ASTRAL)}})
    text = dump_yaml(objs)
    loaders = [yaml.SafeLoader] + ([yaml.CSafeLoader] if yaml.__with_libyaml__ else [])
    for loader in loaders:
        assert list(yaml.load_all(text, Loader=loader)) == objs, loader
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return
    (tmp_path / "job.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "kustomization.yaml").write_text("resources:\n- job.yaml\n")
    done = subprocess.run(
        [kubectl, "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert sorted(yaml.safe_load_all(done.stdout), key=str) == sorted(objs, key=str)


#: a stand-in rank: on SIGTERM it takes a second to checkpoint, leaves a mark and exits 143;
#: unasked it trains on for a minute
# A stand-in rank: says "ready" once its SIGTERM handler is in place, and on SIGTERM takes a
# second to "checkpoint" before it exits, so a preStop that did not wait would be seen.
STAND_IN_RANK = """
import pathlib, signal, sys, time
def stop(*_):
    time.sleep(1)
    pathlib.Path(sys.argv[1]).write_text("checkpoint")
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
pathlib.Path(sys.argv[1]).write_text("ready")
time.sleep(60)
"""

# Shell lines for the scripts below. A rank started in the background is only looked for
# once it says it is ready: before its exec the forked shell has no rank's command line, and
# before its handler a SIGTERM would kill it with no checkpoint. A rank is judged gone by its
# command line, not `kill -0`, which also succeeds on a zombie this shell has not yet reaped.
WAIT_READY = 'i=0; until grep -qs ready "$1" || [ $i -ge 300 ]; do sleep 0.1; i=$((i+1)); done'
RUNNING = 'grep -qs . /proc/"$1"/cmdline'


def _worker_and_pre_stop() -> tuple[dict, str]:
    """The rendered MPI worker container and its preStop command as one shell line; skips
    where no PID namespace can be made (the preStop hook runs in one, seeing its pod alone)."""
    if shutil.which("unshare") is None or shutil.which("timeout") is None:
        pytest.skip("no unshare or timeout here")
    probe = subprocess.run(
        ["unshare", "-pf", "--mount-proc", "true"], capture_output=True, timeout=20
    )
    if probe.returncode != 0:
        pytest.skip("cannot make a PID namespace here")
    (mpijob,) = render("mpijob")
    (worker,) = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    return worker, shlex.join(worker["lifecycle"]["preStop"]["exec"]["command"])


@pytest.mark.timeout(60)
def test_mpi_worker_pre_stop_asks_the_pods_ranks_to_stop(tmp_path):
    """A worker pod stopped alone (a node drain) gets no SIGTERM through mpirun, which runs in
    the launcher's pod: the preStop hook must signal the pod's ranks, so they checkpoint,
    rather than wait while they train on until the kubelet kills them at the grace period's
    end. Run for real in its own PID namespace, as in the test below; sshd is left alone."""
    worker, pre_stop = _worker_and_pre_stop()
    python = shlex.quote(sys.executable)
    (tmp_path / "rank.py").write_text(STAND_IN_RANK)
    mark = tmp_path / "mark"
    rank = f"{python} {tmp_path / 'rank.py'} {mark} -m mpi4py -m distconv train"
    sshd = f"{python} -c 'import time; time.sleep(40)' {shlex.join(worker['args'])}"
    script = f"""
        wait_ready() {{ {WAIT_READY}; }}
        running() {{ {RUNNING}; }}
        {sshd} & sshd=$!
        {rank} &
        wait_ready {mark}
        # the grace period is 120 s: "stopped" says the hook did not wait it out
        timeout 15 {pre_stop} && echo stopped
        if running $sshd; then echo sshd-serving; fi
    """
    file = tmp_path / "stop.sh"
    file.write_text(script)
    done = subprocess.run(
        ["unshare", "-pf", "--mount-proc", "sh", str(file)],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.stdout.split() == ["stopped", "sshd-serving"], done.stderr
    assert mark.read_text() == "checkpoint"


@pytest.mark.timeout(60)
def test_mpi_worker_pre_stop_waits_for_the_ranks_and_only_for_them(tmp_path):
    """The preStop command, run for real in its own PID namespace (as a container sees its own
    processes) beside stand-ins with the command lines of the pod's sshd and of its
    per-connection sshd (user distconv): it returns at once without a rank, and only after a
    running rank has exited."""
    worker, pre_stop = _worker_and_pre_stop()
    python = shlex.quote(sys.executable)
    # sshd runs for the pod's whole life; its command line (and the user name in the
    # per-connection one) says "distconv" but it is no rank
    sshd = f"{python} -c 'import time; time.sleep(40)' {shlex.join(worker['args'])}"
    session = f"{python} -c 'import time; time.sleep(40)' 'sshd: distconv@notty'"
    # a stand-in rank with a rank's command line, a second to stop once asked
    (tmp_path / "rank.py").write_text(STAND_IN_RANK)
    mark = tmp_path / "mark"
    rank = f"{python} {tmp_path / 'rank.py'} {mark} -m mpi4py -m distconv train"
    script = f"""
        wait_ready() {{ {WAIT_READY}; }}
        running() {{ {RUNNING}; }}
        {sshd} &
        {session} &
        sleep 0.5
        timeout 5 {pre_stop} && echo alone
        {rank} & pid=$!
        wait_ready {mark}
        timeout 15 {pre_stop} && echo waited
        if running $pid; then echo rank-still-running; else echo rank-gone; fi
    """
    file = tmp_path / "stop.sh"  # from a file: the shell's own command line names no rank
    file.write_text(script)
    done = subprocess.run(
        ["unshare", "-pf", "--mount-proc", "sh", str(file)],  # its end kills the stand-ins
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.stdout.split() == ["alone", "waited", "rank-gone"], done.stderr


@pytest.mark.parametrize(
    "shards, workers, passes",
    [
        (None, "team-b", True),
        ("team-a", None, True),
        ("team-a", "team-a", True),
        ("team-a", "team-b", False),
    ],
)
def test_a_shard_name_as_written_resolves_in_the_workers_namespace(shards, workers, passes):
    """``<pod>.<service>`` as written resolves in the namespace of the pod that dials it:
    workers in team-b dialled team-b's pods of those names while the shards ran in team-a,
    and the check passed it (c5abf7a judged qualified names alone)."""
    objs = copy.deepcopy(render("pserver"))
    for obj, namespace in ((objs[1], shards), (objs[2], workers)):
        if namespace is not None:
            obj["metadata"]["namespace"] = namespace
    problems = manifest_problems(objs)
    assert (problems == []) is passes, problems
    if problems:
        assert "which resolve in namespace team-b, the dialling pod's" in problems[0]


def _kubelet_restarts_within(seconds: float) -> int:
    """How many times the kubelet restarts a container that fails at once, within ``seconds``
    of its first failure: it waits 10 s, then twice as long each time, up to 5 minutes."""
    restarts, at, wait = 0, 0.0, 10.0
    while at + wait <= seconds:
        at, wait, restarts = at + wait, min(2 * wait, 300.0), restarts + 1
    return restarts


@pytest.mark.parametrize("name", ["pserver", "many-shards"])
def test_the_workers_job_outlasts_the_failed_shards_restart(name):
    """One worker's crash fails a sync job's shards at their --timeout; every worker then exits,
    restarts, and is refused until the shards' liveness probe restarts them. A backoffLimit of 3
    restarts a worker ran out in a kubelet-like emulation at 98 s, just as the shards came back;
    one of 6 left a second such incident in the Job's life too few, for the Job
    counts restarts over its whole life (review of the deployment, runs B and F). Each worker's
    restarts in two such incidents, each with one that resumes, must fit the limit (a fresh
    back-off each time: the kubelet's, not reset within 10 minutes, restarts fewer)."""
    _, sts, job = render(name)
    (shard,) = sts["spec"]["template"]["spec"]["containers"]
    live, args = shard["livenessProbe"], shard["args"]
    # distconv pserver's default --timeout where the args give none
    timeout = float(args[args.index("--timeout") + 1]) if "--timeout" in args else 60.0
    # the shard fails at its timeout and its /healthz turns 503 at once; the last failed probe
    # may come a period late
    window = timeout + live["periodSeconds"] * (live["failureThreshold"] + 1)
    per_incident = _kubelet_restarts_within(window + live["timeoutSeconds"]) + 1
    assert job["spec"]["backoffLimit"] >= 2 * per_incident * job["spec"]["completions"]
