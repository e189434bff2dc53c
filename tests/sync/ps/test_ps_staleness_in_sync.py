"""``distconv pserver --max-staleness N`` is async mode's: a sync shard (``--mode sync``, the
default) refuses it as a usage error (exit 2), in the launcher's words. It was taken and
ignored: a by-hand sweep that forgot ``--mode async`` ran sync at every setting.
Not given, the bound stays the default a shard's hello tells its workers."""

from __future__ import annotations

import pytest
from ps_helpers import run_pserver

from distconv.cli import build_parser
from distconv.sync.ps.cli import shard_config

SAID = (
    "--max-staleness {} is for --mode async; a sync step takes every worker's push of that "
    "step, so none is stale"
)


@pytest.mark.parametrize("mode", [[], ["--mode", "sync"]], ids=["default-mode", "sync"])
def test_a_sync_shard_refuses_a_staleness_bound_as_a_usage_error(mode):
    proc = run_pserver("--insecure", "--workers", "2", *mode, "--max-staleness", "0", timeout=30)
    assert proc.returncode == 2, proc
    usage, *_, said = proc.stderr.strip().splitlines()
    assert usage.startswith("usage: distconv pserver "), proc.stderr
    assert said == f"distconv pserver: error: {SAID.format(0)}"


def _config(*flags: str):
    argv = ["pserver", "--bind", "127.0.0.1:0", "--shard", "0", "--num-shards", "1"]
    return shard_config(build_parser().parse_args([*argv, "--workers", "1", *flags]), "")


def test_the_bound_not_given_is_the_default_a_sync_or_async_shard_tells():
    assert _config().max_staleness == _config("--mode", "async").max_staleness == 4
    assert _config("--mode", "async", "--max-staleness", "0").max_staleness == 0
