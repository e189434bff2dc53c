"""Shards in one namespace and a Job of ranks in another, dialling the shards' short names
(``<pod>.<service>:5555``), which resolve in the Job's namespace: the problem read
"--pservers 'p-0.p:5555' is not the shards' DNS names 'p-0.p:5555'", two
equal strings, and never said why. It now leads with the two namespaces, and gives the names to
write."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_manifests import render

pytestmark = pytest.mark.timeout(60)


def _in_namespaces(shards: str, job: str) -> list[dict]:
    objs = copy.deepcopy(render("pserver"))
    for obj in objs:
        obj["metadata"]["namespace"] = job if obj["kind"] == "Job" else shards
    return objs


def test_short_names_dialled_from_another_namespace_say_so():
    problems = manifest_problems(_in_namespaces("team-a", "team-b"))
    assert problems, "the Job's short names reach team-b's pods, not the shards"
    qualified = ",".join(f"digits-ps-pserver-{i}.digits-ps-pserver.team-a:5555" for i in (0, 1))
    for problem, source in zip(problems, ("--pservers", "DISTCONV_PSERVERS")):
        assert problem == (
            f"Job digits-ps-worker: {source} names the shards short, which resolve in namespace "
            f"team-b, the dialling pod's, but the shards are in team-a: write {source} "
            f"'{qualified}'"
        ), problem


def test_the_same_namespace_still_passes():
    assert manifest_problems(_in_namespaces("team-a", "team-a")) == []


def test_names_qualified_with_another_namespace_are_not_called_short():
    """``<pod>.<service>.team-b.svc`` names team-b's pods as written: no note."""
    objs = _in_namespaces("team-a", "team-b")
    args = objs[2]["spec"]["template"]["spec"]["containers"][0]["args"]
    at = args.index("--pservers") + 1
    args[at] = ",".join(f"{name}.team-b.svc:5555" for name in _short_names(args[at]))
    (problem,) = [p for p in manifest_problems(objs) if ": --pservers " in p]
    assert problem.endswith("'"), problem


def _short_names(servers: str) -> list[str]:
    return [server.rsplit(":", 1)[0] for server in servers.split(",")]
