"""``render_manifests(max_staleness=N)`` (``distconv-launch k8s --max-staleness N``): the async
shards' StatefulSet runs ``distconv pserver --max-staleness N``, as ``distconv-launch local``'s
shards do; the renderer took no staleness, so a k8s staleness sweep meant editing the
rendered StatefulSet by hand. Where no shard reads it (an MPIJob, ``mode="sync"``) or
every shard would refuse it at its start, it is refused before anything renders."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

ASYNC = dict(job_name="stale", workers=2, servers=2, image="d:1", mode="async")


def _shard_args(objs: list[dict]) -> list[str]:
    (sts,) = [o for o in objs if o["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    return container["args"]


@pytest.mark.parametrize("staleness", [0, 2**63 - 1])
def test_the_shards_are_given_the_staleness_and_the_checks_take_it(staleness: int):
    objs = render_manifests(**ASYNC, max_staleness=staleness)
    args = _shard_args(objs)
    at = args.index("--max-staleness")
    assert args[at + 1] == str(staleness) and args[args.index("--mode") + 1] == "async"
    assert manifest_problems(objs) == []  # read by distconv pserver's own parser and checks
    assert "--max-staleness" not in _shard_args(render_manifests(**ASYNC))  # their default


@pytest.mark.parametrize(
    "change, said",
    [
        (dict(mode="sync"), "--max-staleness 2 is for --mode async; a sync step takes every"),
        (dict(servers=0), "--max-staleness is for parameter-server shards; an MPIJob has none"),
        (dict(mpi=True, servers=0), "--max-staleness is for parameter-server shards; an MPIJob"),
        (dict(max_staleness=-1), "--max-staleness must be >= 0 and at most"),
        (dict(max_staleness=2**63), "--max-staleness must be >= 0 and at most"),
        (dict(max_staleness=True), "--max-staleness must be an integer, got True"),
        (dict(max_staleness="2"), "--max-staleness must be an integer, got '2'"),
    ],
    ids=["sync", "servers-0", "mpi", "negative", "past-hello", "bool", "text"],
)
def test_a_staleness_no_shard_reads_or_takes_is_refused(change: dict, said: str):
    with pytest.raises(ValueError) as refused:
        render_manifests(**{**ASYNC, "max_staleness": 2, **change})
    assert str(refused.value).startswith(said), refused.value
