"""``distconv-launch k8s -- --timeout N``: the rendered shards wait N seconds for a worker, as
the workers do, and as ``distconv-launch local``'s shards do.

The renderer passed ``--timeout`` to the workers only: the shards' StatefulSet kept their 60 s,
so every worker of a rendered job with ``--timeout 10`` warned at setup that its shards outwait
it, and a worker that never came was blamed on a healthy shard (the worker gave up at 15 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.cli import build_parser
from distconv.deploy import manifest_problems, render_manifests
from tests.deploy.test_manifests import _distconv_argv, validate
from tests.sync.ps.ps_helpers import assert_missing_rank_named_unwarned, shard_argv

pytestmark = pytest.mark.timeout(60)

JOB = dict(job_name="waits", workers=2, servers=2, image="d:1")


def _container(objs: list[dict], kind: str) -> dict:
    (obj,) = [o for o in objs if o["kind"] == kind]
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    return container


def _args(objs: list[dict], kind: str) -> list[str]:
    return _container(objs, kind)["args"]


def _shard_parsed(objs: list[dict]):
    """The shards' command as ``distconv pserver``'s own parser reads it, ``$(VAR)`` filled."""
    return build_parser().parse_args(_distconv_argv(_container(objs, "StatefulSet")))


def _shard_timeout(objs: list[dict]) -> str | None:
    args = _args(objs, "StatefulSet")
    return args[args.index("--timeout") + 1] if "--timeout" in args else None


@pytest.mark.parametrize(
    ("train", "shards"),
    [
        (["--epochs", "1", "--timeout", "10"], "10"),
        (["--timeout=2.5", "--epochs", "1"], "2.5"),
        (["--time", "7", "--timeout", "3"], "3"),  # spelled out; the last one, as train reads
        (["--timeout", "1e1"], "10"),  # as the workers read it
        (["--timeout", "0.2"], "0.2"),  # a shard's least; below it the render is refused
    ],
)
def test_the_shards_wait_as_long_as_the_workers(train: list[str], shards: str):
    for mode in ("sync", "async"):
        objs = render_manifests(**JOB, mode=mode, train_args=train)
        assert _shard_timeout(objs) == shards
        for obj in objs:
            validate(obj)  # Kubernetes' own schemas
        assert manifest_problems(objs) == []
        assert _shard_parsed(objs).timeout == float(shards)


def test_shards_of_workers_without_a_timeout_keep_their_default():
    objs = render_manifests(**JOB, train_args=["--epochs", "1"])
    assert _shard_timeout(objs) is None
    assert _shard_parsed(objs).timeout == 60


def test_the_workers_keep_their_own_timeout_as_given():
    objs = render_manifests(**JOB, train_args=["--timeout", "0.2"])
    worker = _args(objs, "Job")
    assert worker[worker.index("--timeout") + 1] == "0.2"


def test_a_worker_of_a_rendered_job_names_the_missing_rank_and_warns_of_nothing(
    tmp_path: Path, caplog
):
    """A real shard given the rendered shards' ``--timeout`` for ``-- --timeout 1``: rank 0's
    setup names rank 1, which never came, where it warned and gave up on the shard (60 s)."""
    timeout = _shard_timeout(render_manifests(**JOB, train_args=["--timeout", "1"]))
    assert timeout is not None, "the rendered shards were given no --timeout"
    argv = shard_argv(["-m", "distconv"], workers=2) + ["--timeout", timeout]
    assert_missing_rank_named_unwarned(tmp_path, argv, caplog, timeout=1.0)
