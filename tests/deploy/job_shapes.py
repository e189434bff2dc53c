"""Manifests the deploy tests start from: the rendered workers' Job and MPIJob, changed as a
test needs, and docs/kubernetes.md's text, shared by the tests that hold the check to them."""

from __future__ import annotations

import copy
from pathlib import Path

from distconv.deploy import render_manifests

KUBERNETES = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"


def workers_job(workers: int, head: list[str]) -> dict:
    """The rendered workers' Job, its ranks training alone (no shards) behind ``head``."""
    objs = render_manifests(job_name="j", workers=workers, servers=1, image="d:1")
    (job,) = copy.deepcopy([o for o in objs if o["kind"] == "Job"])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    at = args.index("--sync")
    del args[at : at + 6]  # --sync pserver --pservers ... --keys ...
    container["args"] = [*head, "/opt/venv/bin/distconv", *args[1:]]
    drop = {"DISTCONV_PSERVERS", "DISTCONV_KEYS"}
    container["env"] = [v for v in container["env"] if v["name"] not in drop]
    return job


def mpijob(value: dict | None, args: list[str] = ()) -> list[dict]:
    """The rendered MPIJob of 4 ranks, ``DISTCONV_WORLD_SIZE`` set to ``value`` (an env entry's
    value part) in its launcher unless None, ``args`` added to mpirun's."""
    objs = copy.deepcopy(render_manifests(job_name="m", workers=4, servers=0, image="d:1"))
    launcher = objs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    (container,) = launcher["containers"]
    if value is not None:
        container["env"].append({"name": "DISTCONV_WORLD_SIZE", **value})
    container["args"] += list(args)
    return objs


def kubernetes_doc_text() -> str:
    """docs/kubernetes.md with its whitespace runs made single spaces (sentences wrap)."""
    return " ".join(KUBERNETES.read_text(encoding="utf-8").split())
