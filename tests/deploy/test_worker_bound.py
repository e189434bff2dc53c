"""``render_manifests`` refuses more workers than a parameter-server shard serves (65536), as
it refuses any other value out of range: it rendered a StatefulSet whose every shard exits at
start on ``--workers 65537``. An MPIJob has no such bound."""

from __future__ import annotations

import argparse

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.sync.ps.cli import add_pserver
from distconv.sync.ps.config import MAX_WORKERS

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("servers", [1, 3])
def test_more_workers_than_a_shard_serves_is_refused(servers):
    with pytest.raises(ValueError, match=r"--workers must be 1\.\.65536, got 65537"):
        render_manifests(job_name="j", workers=MAX_WORKERS + 1, servers=servers, image="d:1")


def test_the_bound_itself_renders_and_the_shard_takes_it():
    objs = render_manifests(job_name="j", workers=MAX_WORKERS, servers=1, image="d:1")
    assert manifest_problems(objs) == []
    (sts,) = [o for o in objs if o["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[args.index("--workers") + 1] == str(MAX_WORKERS)
    parser = add_pserver(argparse.ArgumentParser().add_subparsers())
    parsed = parser.parse_args([a.replace("$(DISTCONV_SHARD)", "0") for a in args[2:]])
    assert parsed.workers == MAX_WORKERS


def test_an_mpijob_is_not_bound_by_the_shards():
    (mpijob,) = render_manifests(job_name="j", workers=MAX_WORKERS + 1, servers=0, image="d:1")
    launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    args = launcher["containers"][0]["args"]
    assert args[args.index("-np") + 1] == str(MAX_WORKERS + 1)
