"""An MPI worker pod declares a port for each rank it runs: local rank R serves its probes and
``/metrics`` on ``--health-port`` + R, but the pod declared 8080 alone, so Prometheus's pod
discovery and a PodMonitor on the named port found local rank 0 of each pod, and three ranks of
four in the GPU example went unscraped."""

from __future__ import annotations

import re

import pytest
import yaml

from distconv.deploy import render_manifests
from distconv.deploy.check import _templates
from distconv.runtime import detect_runtime
from tests.deploy.job_shapes import KUBERNETES
from tests.deploy.test_manifests import (
    CONFIGS,
    REPO_ROOT,
    checked_mpijob,
    mpijob_containers,
)

#: Kubernetes' IsValidPortName (k8s.io/apimachinery/pkg/util/validation): an IANA service
#: name, which the schemas leave a plain string, but the API server refuses a pod without
_PORT_NAME_CHARS = re.compile(r"[-a-z0-9]{1,15}")

MPI_CONFIGS = [name for name, kw in CONFIGS.items() if kw["servers"] == 0]


def _valid_port_name(name: str) -> bool:
    return (
        _PORT_NAME_CHARS.fullmatch(name) is not None
        and re.search("[a-z]", name) is not None
        and "--" not in name
        and not name.startswith("-")
        and not name.endswith("-")
    )


def _parts(mpijob: dict) -> tuple[dict, dict, int]:
    return *mpijob_containers(mpijob), mpijob["spec"]["slotsPerWorker"]


def _served_ports(launcher: dict, slots: int) -> list[set[int]]:
    """The ports each worker pod's ranks serve on, as the ranks work them out: Hydra gives
    rank R of ``-np N`` over hosts of ``slots`` slots ``PMI_RANK`` R and ``MPI_LOCALRANKID``
    R mod slots (hosts filled in order), with the launcher's environment; a rank serves on
    ``--health-port`` + its local rank (distconv.job)."""
    args = launcher["args"]
    ranks, base = int(args[args.index("-np") + 1]), int(args[args.index("--health-port") + 1])
    env = {e["name"]: e["value"] for e in launcher["env"] if "value" in e}
    pods: list[set[int]] = [set() for _ in range(-(-ranks // slots))]
    for rank in range(ranks):
        hydra = {"PMI_RANK": str(rank), "PMI_SIZE": str(ranks)}
        hydra["MPI_LOCALRANKID"] = str(rank % slots)
        local = detect_runtime(environ={**env, **hydra}).local_rank
        pods[rank // slots].add(base + local)
    return pods


@pytest.mark.parametrize("name", MPI_CONFIGS)
def test_every_rank_of_a_worker_pod_serves_on_a_declared_port(name):
    mpijob = checked_mpijob(name)
    launcher, worker, slots = _parts(mpijob)
    health = [p for p in worker["ports"] if p["name"] != "ssh"]
    assert [p["containerPort"] for p in health] == list(range(8080, 8080 + slots))
    assert [p["name"] for p in health] == ["health", *(f"health-{r}" for r in range(1, slots))]
    assert all(p["protocol"] == "TCP" for p in health)
    for pod in _served_ports(launcher, slots):
        assert pod == {p["containerPort"] for p in health}
    names = [p["name"] for p in worker["ports"]]
    assert len(set(names)) == len(names) and all(map(_valid_port_name, names)), names
    numbers = [p["containerPort"] for p in worker["ports"]]
    assert len(set(numbers)) == len(numbers), numbers


def test_the_gpu_example_declares_each_of_its_four_ranks_ports():
    """As read from disk, as an operator's script reads it: 8080 to 8083, each named."""
    path = REPO_ROOT / "k8s" / "mpijob-gpu" / "mpijob-digits-mpi-gpu.yaml"
    (mpijob,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    launcher, worker, slots = _parts(mpijob)
    assert slots == 4
    declared = {p["name"]: p["containerPort"] for p in worker["ports"]}
    health = {"health": 8080, "health-1": 8081, "health-2": 8082, "health-3": 8083}
    assert declared == {"ssh": 2222, **health}
    assert _served_ports(launcher, slots) == [{8080, 8081, 8082, 8083}] * 2


@pytest.mark.parametrize("slots", [57456, 57457])
def test_slots_are_refused_where_a_ranks_port_would_pass_65535(slots):
    kw = dict(job_name="m", workers=slots, servers=0, image="d:1", slots_per_worker=slots)
    if slots == 57456:  # local rank 57455 serves on 65535: the last port there is
        (mpijob,) = render_manifests(**kw)
        _, worker, _ = _parts(mpijob)
        last = worker["ports"][-1]
        assert last == {"name": "health-57455", "containerPort": 65535, "protocol": "TCP"}
        assert _valid_port_name(last["name"])
        return
    with pytest.raises(ValueError, match=r"local rank 57456's probes on port 65536 .*past 65535"):
        render_manifests(**kw)


def _doc_blocks(kind: str) -> list[dict]:
    """docs/kubernetes.md's YAML blocks that hold an object of ``kind`` (a PodMonitor) or a
    scrape job (a list of them)."""
    blocks = re.findall(r"```yaml\n(.*?)```", KUBERNETES.read_text(encoding="utf-8"), re.S)
    found = []
    for block in blocks:
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and doc.get("kind") == kind:
            found.append(doc)
        elif isinstance(doc, list) and kind == "scrape" and "kubernetes_sd_configs" in doc[0]:
            found.append(doc[0])
    return found


def test_the_docs_podmonitor_scrapes_every_rank_of_the_gpu_example():
    (monitor,) = _doc_blocks("PodMonitor")
    (mpijob,) = render_manifests(**CONFIGS["mpijob-gpu"])
    _, worker, _ = _parts(mpijob)
    labels = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    endpoints = monitor["spec"]["podMetricsEndpoints"]
    assert [e["port"] for e in endpoints] == [p["name"] for p in worker["ports"][1:]]
    assert all(e.get("path", "/metrics") == "/metrics" for e in endpoints)


#: the rendered shapes, and pods of more slots than any of them: local ranks 10 and up have
#: two-digit names (health-10), which a regex for one digit would drop while every shape above
#: still passed; the last is the most slots a port number allows
WIDE_SLOTS = {
    f"mpi-{slots}-slots": dict(
        job_name="wide", workers=slots, servers=0, image="d:1", slots_per_worker=slots
    )
    for slots in (12, 57456)
}


def test_the_docs_scrape_job_keeps_every_probe_port_of_every_job_and_no_other():
    """The plain Prometheus job (pod discovery): one target per declared port whose name its
    regex takes (Prometheus anchors it), across both shapes of job and any slot count."""
    (job,) = _doc_blocks("scrape")
    (rule,) = [
        r
        for r in job["relabel_configs"]
        if r["source_labels"] == ["__meta_kubernetes_pod_container_port_name"]
    ]
    assert rule["action"] == "keep"
    kept = re.compile(rule["regex"])
    shapes = {**CONFIGS, **WIDE_SLOTS}
    for name in shapes:
        for obj in render_manifests(**shapes[name]):
            for _, template in _templates(obj):
                for container in template["spec"]["containers"]:
                    for port in container.get("ports", []):
                        probed = port["name"].startswith("health")
                        assert bool(kept.fullmatch(port["name"])) == probed, (name, port)
