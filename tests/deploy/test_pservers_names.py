"""The workers' --pservers (and DISTCONV_PSERVERS) may name the shards absolutely, with a
trailing dot, where the names go down to the cluster's domain (which spares the resolver its
search list)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "form, refused",
    [
        ("j-pserver-{i}.j-pserver:5555", False),  # rendered
        ("j-pserver-{i}.j-pserver.default.svc.cluster.local.:5555", False),  # absolute
        ("j-pserver-{i}.j-pserver.:5555", True),  # absolute without the domain: no such name
        ("j-pserver-{i}.j-pserver.default.svc.:5555", True),
        ("j-pserver-{i}.other:5555", True),
    ],
)
def test_the_shards_names_are_compared_as_dns_reads_them(form, refused):
    """An absolute name (``...svc.cluster.local.``) reaches the same shards, and the checks
    refused it ('is not the shards' DNS names')."""
    objs = render_manifests(job_name="j", workers=2, servers=2, image="d:1")
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    servers = ",".join(form.format(i=i) for i in range(2))
    args = container["args"]
    args[args.index("--pservers") + 1] = servers
    for var in container["env"]:
        if var["name"] == "DISTCONV_PSERVERS":
            var["value"] = servers
    problems = manifest_problems(objs)
    if refused:
        assert len(problems) == 2 and all("is not the shards' DNS names" in p for p in problems)
    else:
        assert problems == [], problems
