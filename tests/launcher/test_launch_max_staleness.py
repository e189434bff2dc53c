"""``distconv-launch local --max-staleness N``: the async shards it starts drop a push more than
N updates behind, as ``distconv pserver --max-staleness N`` does.

The launcher started its shards with the default (4) and had no flag to change it: a staleness
sweep, an async-SGD researcher's first experiment, meant starting every shard and worker by
hand. Where it would change nothing (``--mode sync``, ``--servers 0``) it is refused as the
launcher's other such flags are (:func:`launcher.options.ignored_flag`), and so is a value
every shard would refuse at its start.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from launcher.cli import build_parser, local_plan
from launcher.commands import parse_program, server_command
from launcher.k8s import checked_manifests
from launcher.options import parse_own
from tests.child_env import child_env
from tests.launcher.launch_cli import launch, usage_refusal

WORKER = Path(__file__).with_name("ps_launch_worker.py")


@pytest.mark.parametrize(
    "own, said",
    [
        (["--max-staleness", "2"], "--max-staleness 2 is for --mode async; a sync step takes"),
        (
            ["--mode", "async", "--servers", "0", "--max-staleness", "2"],
            "--mode async is for the parameter-server shards, and --servers 0 starts none",
        ),
        (
            ["--servers", "0", "--max-staleness", "2"],
            "--max-staleness 2 is for the parameter-server shards, and --servers 0 starts none",
        ),
        (
            ["--mode", "async", "--max-staleness", "-1"],
            "argument --max-staleness: must be >= 0, got -1",
        ),
        (
            ["--mode", "async", "--max-staleness", str(2**63)],
            f"argument --max-staleness: must be at most {2**63 - 1} (2**63 - 1), got {2**63}",
        ),
    ],
    ids=["sync", "no-shards-async", "no-shards", "negative", "past-hello"],
)
def test_a_staleness_the_shards_would_not_read_or_take_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], own: list[str], said: str
):
    """Refused before anything starts: the shards read it in async mode only, and refused a
    negative or too large one at their start, after the keys were made."""
    line = usage_refusal(capsys, "local", "--workers", "2", *own, "--", "--epochs", "1")
    assert line.startswith(f"distconv-launch local: error: {said}"), line


K8S = ("k8s", "--workers", "2", "--image", "d:1")


@pytest.mark.parametrize(
    "own, said",
    [
        (["--max-staleness", "2"], "--max-staleness 2 is for --mode async; a sync step takes"),
        (
            ["--mpi", "--max-staleness", "2"],
            "--max-staleness 2 is for parameter-server shards, and --mpi renders an MPIJob",
        ),
        (
            ["--servers", "0", "--max-staleness", "2"],
            "--max-staleness 2 is for parameter-server shards, and --servers 0 renders an MPIJob",
        ),
        (
            ["--mode", "async", "--max-staleness", str(2**63)],
            f"argument --max-staleness: must be at most {2**63 - 1} (2**63 - 1), got {2**63}",
        ),
    ],
    ids=["sync", "mpi", "servers-0", "past-hello"],
)
def test_a_k8s_staleness_the_shards_would_not_read_or_take_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], own: list[str], said: str
):
    """k8s takes ``--max-staleness`` as local does, refused where local's is."""
    line = usage_refusal(capsys, *K8S, *own, "--", "--epochs", "1")
    assert line.startswith(f"distconv-launch k8s: error: {said}"), line


def test_a_k8s_render_gives_its_shards_the_staleness():
    """The StatefulSet's shards run ``--max-staleness N``: the renderer took no staleness, so
    ``k8s`` had no such flag, and its shards ran with the default, 4."""

    def shard_argv(*own: str) -> list[str]:
        objects = checked_manifests(parse_own(build_parser(), [*K8S, *own]), ["--epochs", "1"])
        (shards,) = [o for o in objects if o["kind"] == "StatefulSet"]
        return shards["spec"]["template"]["spec"]["containers"][0]["args"]

    given = shard_argv("--mode", "async", "--max-staleness", "0")
    assert given[given.index("--max-staleness") :][:2] == ["--max-staleness", "0"]
    assert "--max-staleness" not in shard_argv("--mode", "async")  # the shards' own default


def test_the_shards_are_given_the_staleness_only_where_it_is_given(tmp_path: Path):
    def shard_argv(*own: str) -> list[str]:
        args = parse_own(build_parser(), ["local", "--workers", "2", *own])
        servers, _, _ = local_plan(args, parse_program(["--epochs", "1"]), "j", tmp_path, {})
        return server_command(0, 7, servers, python="py")

    given = shard_argv("--mode", "async", "--max-staleness", "0")
    assert given[given.index("--max-staleness") :][:2] == ["--max-staleness", "0"]
    assert "--max-staleness" not in shard_argv("--mode", "async")  # the shards' own default


@pytest.mark.timeout(60)
def test_an_async_shard_serves_with_the_staleness_given(tmp_path: Path):
    """A real launch: the worker's setup line says the bound the shard told it in ``hello``."""
    run = tmp_path / "run"
    done = launch(
        "local", "--workers", "1", "--servers", "1", "--mode", "async", "--max-staleness", "0",
        "--run-dir", str(run), "--grace", "5", "--", str(WORKER), str(tmp_path),
        "1", cwd=tmp_path, timeout=50,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    log = (run / "logs" / "worker-0.log").read_text()
    assert "(async mode, max staleness 0)" in log, log[-3000:]


#: a fresh interpreter reads the launcher's flags with --max-staleness: refused and taken
_READ_FLAGS = """
import contextlib, io, sys
from launcher.cli import build_parser
from launcher.options import parse_own
for own in (["local", "--workers", "2", "--mode", "async", "--max-staleness", "-1"],
            ["local", "--workers", "2", "--mode", "async", "--max-staleness", "99" * 20],
            ["local", "--workers", "2", "--mode", "async", "--max-staleness", "3"],
            ["k8s", "--workers", "2", "--image", "d:1", "--mode", "async", "--max-staleness", "3"]):
    with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
        parse_own(build_parser(), own)
print(sorted(m for m in ("numpy", "zmq", "distconv.sync.ps.config") if m in sys.modules))
"""


@pytest.mark.timeout(60)
def test_the_staleness_flag_is_read_without_numpy():
    """Its bound came from distconv.sync.ps.config, whose wire format loads numpy and pyzmq:
    ``--max-staleness -1``'s usage error (and every launch given the flag) waited for them
    while reading its flags (found in review); the bound is still the shards', one constant
    that they, the launcher and the k8s renderer import (a copy in launcher.options, pinned
    equal by this test, was a second place to change)."""
    from distconv.deploy import render_args
    from distconv.sync.ps import config, limits
    from launcher import options

    assert options.MAX_SETTING is config.MAX_SETTING is render_args.MAX_SETTING
    assert limits.MAX_SETTING is config.MAX_SETTING
    done = subprocess.run(
        [sys.executable, "-c", _READ_FLAGS], capture_output=True, text=True, env=child_env(),
        timeout=50,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr
