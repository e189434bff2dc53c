"""A container beside the ranks that runs no ``distconv train`` (a log shipper) is no rank: it
writes no run directory and no kernel cache, and reads no world size. The checks held it to the
ranks' needs and refused a pod whose ranks had everything."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.walk import _templates

pytestmark = pytest.mark.timeout(60)

#: a sidecar with no volume, no environment and no distconv
LOGGER = {
    "name": "logger",
    "image": "busybox:1",
    "args": ["sh", "-c", "sleep infinity"],
    "resources": {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"cpu": "100m", "memory": "64Mi"},
    },
    "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
}
#: what only a rank needs, which the checks asked of the logger
RANKS_NEEDS = ("--out", "CUPY_CACHE_DIR", "DISTCONV_WORLD_SIZE")


@pytest.mark.parametrize(
    "config",
    [
        dict(job_name="j", workers=2, servers=1, image="d:1", gpus=1),
        dict(job_name="j", workers=4, servers=0, image="d:1", gpus=1, slots_per_worker=2),
    ],
    ids=["pserver", "mpijob"],
)
def test_a_sidecar_that_runs_no_rank_is_not_held_to_the_ranks_needs(config):
    """A logger beside each worker (and, under MPI, beside sshd) was refused: '--out
    /var/lib/distconv/run/train is on no writable volume', CuPy's cache likewise, and
    'DISTCONV_WORLD_SIZE is not set; every rank would refuse to start'."""
    objs = render_manifests(**config, train_args=["--data", "digits"])
    for obj in objs:
        for _, template in _templates(obj):
            template["spec"]["containers"].append(dict(LOGGER))
    problems = manifest_problems(objs)
    wrong = [p for p in problems if any(need in p for need in RANKS_NEEDS)]
    assert wrong == [], wrong


def test_the_ranks_own_container_is_still_held_to_them():
    """The ranks' container is judged by its own mounts: without the run volume its --out is
    refused, whatever a sidecar mounts."""
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    (job,) = [o for o in objs if o["kind"] == "Job"]
    spec = job["spec"]["template"]["spec"]
    (rank,) = spec["containers"]
    sidecar = {**LOGGER, "volumeMounts": list(rank["volumeMounts"])}
    rank["volumeMounts"] = [m for m in rank["volumeMounts"] if m["name"] != "work"]
    spec["containers"].append(sidecar)
    wrong = [p for p in manifest_problems(objs) if "--out" in p]
    assert len(wrong) == 1 and wrong[0].startswith("Job j-worker container worker: --out"), wrong


@pytest.mark.parametrize(
    "config",
    [
        dict(job_name="j", workers=2, servers=1, image="d:1"),
        dict(job_name="j", workers=4, servers=0, image="d:1", slots_per_worker=2),
    ],
    ids=["pserver", "mpijob"],
)
def test_a_sidecar_that_serves_no_probes_needs_no_health_port(config):
    """A logger beside every shard, worker and sshd was refused for want of probes ('container
    logger: no container port named health for the probes'): it runs no shard or rank, so
    there is nothing for it to serve."""
    objs = render_manifests(**config, train_args=["--data", "digits"])
    for obj in objs:
        for _, template in _templates(obj):
            template["spec"]["containers"].append(dict(LOGGER))
    assert manifest_problems(objs) == []


@pytest.mark.parametrize(
    "args",
    [
        ["sh", "-c", "exec distconv train --data digits"],  # a rank, however started
        ["sh", "-c", "sleep 1", "--health-port", "8080"],  # it says it serves them
    ],
)
def test_a_container_that_runs_a_rank_or_takes_a_health_port_still_needs_probes(args):
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["spec"]["template"]["spec"]["containers"].append({**LOGGER, "args": args})
    problems = [p for p in manifest_problems(objs) if "container logger" in p]
    assert any("no container port named health" in p for p in problems), problems


def _no_probes(container):
    """``container`` with no --health-port, no port named health and no probes."""
    args = container["args"]
    for flag in ("--health-port", "--health-host"):
        i = args.index(flag)
        del args[i : i + 2]
    container.pop("ports")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        container.pop(probe, None)


def _in_a_shell(prefix):
    def edit(container):
        container["args"] = ["sh", "-c", prefix + " ".join(container["args"])]

    return edit


def _with_options(*options):
    def edit(container):
        container["args"][1:1] = list(options)

    return edit


@pytest.mark.parametrize(
    "kind, started, drop, words",
    [
        ("Job", _with_options("-q"), _no_probes, "no container port named health"),
        ("StatefulSet", _with_options("--quiet"), _no_probes, "no container port named health"),
        ("Job", _in_a_shell("cd /tmp;"), _no_probes, "no container port named health"),
        ("Job", _in_a_shell("cd /tmp&&exec "), _no_probes, "no container port named health"),
        ("Job", _in_a_shell("exec "), "DISTCONV_WORLD_SIZE", "DISTCONV_WORLD_SIZE is not set"),
        ("Job", _with_options("-q"), "DISTCONV_WORLD_SIZE", "DISTCONV_WORLD_SIZE is not set"),
    ],
    ids=["q-train", "quiet-pserver", "sh-semicolon", "sh-and", "sh-world", "q-world"],
)
def test_a_rank_however_started_is_no_sidecar(kind, started, drop, words):
    """A shard or a rank started after distconv's own options (``distconv -q train``) or in a
    shell's command string (``sh -c "cd /x;distconv train ..."``) was taken for a sidecar: with
    no probes, or no DISTCONV_WORLD_SIZE, it passed, where before the sidecar rule it was
    refused."""
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    (obj,) = [o for o in objs if o["kind"] == kind]
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    if drop == "DISTCONV_WORLD_SIZE":
        container["env"] = [e for e in container["env"] if e["name"] != drop]
    else:
        drop(container)
    started(container)
    problems = manifest_problems(objs)
    assert any(p.startswith(f"{kind} j-") and words in p for p in problems), problems


def test_distconv_s_own_options_before_the_command_are_read_past():
    """``distconv -q pserver`` and ``distconv --quiet train`` (distconv's own option before the
    command) were no shard and no rank to the checks: the job was refused as having no shard
    StatefulSet, and a rank without --resume auto passed."""
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    for obj, option in zip([o for o in objs if o["kind"] in ("StatefulSet", "Job")], "qQ"):
        (container,) = obj["spec"]["template"]["spec"]["containers"]
        container["args"].insert(1, "-q" if option == "q" else "--quiet")
    assert manifest_problems(objs) == []
    (job,) = [o for o in objs if o["kind"] == "Job"]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    i = args.index("--resume")
    del args[i : i + 2]
    (problem,) = manifest_problems(objs)
    assert problem.startswith("Job j-worker container worker: distconv train needs --resume auto")


def test_a_shard_started_in_a_shell_is_the_jobs_shard_statefulset():
    """b2c1449 took ``sh -c "exec distconv pserver ..."`` for a shard (no sidecar), but the
    ranks' --pservers was still matched against shards found by ``distconv pserver`` in the
    argv alone: such a job was refused as "--pservers is set but the job has no shard
    StatefulSet". Its addresses, in a shell's words, are not judged; a
    StatefulSet that runs no shard is still none."""
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    (sts,) = [o for o in objs if o["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    container["args"] = ["sh", "-c", "exec " + " ".join(container["args"])]
    assert manifest_problems(objs) == []
    container["args"] = ["sh", "-c", "exec sleep infinity"]  # no shard runs at all
    problems = manifest_problems(objs)
    assert "Job j-worker: --pservers is set but the job has no shard StatefulSet" in problems
