"""Names too long for what Kubernetes builds from them were judged as written: a bare Pod's
host name is its name cut to 63 characters (a DNS label; the kubelet cuts it, and strips the
``-`` it then ends in), so a rank placed by its host name's ordinal
(``DISTCONV_RANK_FROM_HOSTNAME``) in a Pod of a longer name has none, and refuses to start,
while the check read the ordinal off the whole name. And a StatefulSet whose name is longer
than 52 characters creates no pod (its pods' ``controller-revision-hash`` label, the name and
a hash, passes the 63 a label holds), which passed."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.walk import pod_hostname

pytestmark = pytest.mark.timeout(60)


def _rendered(workers: int = 1) -> list[dict]:
    return copy.deepcopy(render_manifests(job_name="j", workers=workers, servers=1, image="d:1"))


def test_the_host_name_is_the_pod_name_cut_to_63_characters():
    assert pod_hostname("a" * 63) == "a" * 63
    assert pod_hostname("a" * 61 + "-12") == "a" * 61 + "-1"
    assert pod_hostname("a" * 62 + "-0") == "a" * 62  # the "-" it ends in is stripped
    assert pod_hostname("a" * 60 + "-0") == "a" * 60 + "-0"


def _bare_pod(name: str) -> list[dict]:
    """The rendered shards and, for the worker Job, a bare Pod ``name`` running its rank as
    rank 0 of 1 by its host name's ordinal."""
    service, shards, job = _rendered()
    spec = {**job["spec"]["template"]["spec"], "restartPolicy": "Never"}
    env = spec["containers"][0]["env"]
    env[:] = [var for var in env if var["name"] != "DISTCONV_WORLD_SIZE"]
    env += [
        {"name": "DISTCONV_RANK_FROM_HOSTNAME", "value": "1"},
        {"name": "DISTCONV_WORLD_SIZE", "value": "1"},
    ]
    metadata = {**job["spec"]["template"]["metadata"], "name": name}
    return [
        service,
        shards,
        {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec},
    ]


def test_a_bare_pod_placed_by_a_short_host_name_has_no_problem():
    assert manifest_problems(_bare_pod("w" * 40 + "-0")) == []


def test_a_bare_pod_whose_host_name_loses_its_ordinal_is_named():
    name = "w" * 62 + "-0"
    problems = manifest_problems(_bare_pod(name))
    assert len(problems) == 1
    assert problems[0].startswith(f"Pod {name}: pod {'w' * 62}'s rank would refuse to start")
    assert "does not end in -<ordinal>" in problems[0]


@pytest.mark.parametrize(("length", "named"), [(52, False), (53, True), (54, True), (60, True)])
def test_a_statefulset_name_over_52_characters_is_named(length, named):
    """The line said no pod would be created, where a 53- or 54-character name
    runs the pods of a revision whose hash is shorter than 10 characters; it now says what
    Kubernetes does: the label is <name>-<revision hash>, refused over 63 characters."""
    objs = _rendered()
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    name = "s" * length
    shards["metadata"]["name"] = name
    line = (
        f"StatefulSet {name}: a StatefulSet's name over 52 characters, {length}: its pods' "
        "controller-revision-hash label is <name>-<revision hash>, the hash the pod template's "
        "FNV-32 sum in decimal, 10 characters for about 3 revisions in 4 (Kubernetes' "
        "ControllerRevisionName); for such a revision the label passes the 63 a label holds, "
        "and the API server refuses every pod the StatefulSet controller creates (a 53- or "
        "54-character name runs only the revisions of a shorter hash)"
    )
    assert (line in manifest_problems(objs)) is named
    # the numbers the line gives are Kubernetes': 52 + "-" + a 10-character hash is 63
    assert 52 + len("-") + len(str(2**32 - 1)) == 63
    assert round((2**32 - 10**9) / 2**32, 2) == 0.77  # a hash of 10 digits: about 3 in 4
