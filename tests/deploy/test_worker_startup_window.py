"""A worker's startup probe outlasts its wait for late ranks.

A worker whose peers are late to the start-up job check says ``hello`` again for up to
``JOB_CHECK_ROUNDS`` rounds, each one ``--timeout`` of the shards'
(:mod:`distconv.sync.ps.late_ranks`). Its ``/readyz`` stays 503 all that while, so a startup
probe whose window (``periodSeconds`` x ``failureThreshold``) is shorter has the kubelet kill a
worker that waits as designed. These tests read both numbers from the manifests (the checked-in
examples as read from disk, and fresh renders) and hold them to that relation, so a change to
one without the other fails.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import pytest
import yaml

from distconv.deploy import render_manifests
from distconv.sync.ps.cli import add_pserver
from distconv.sync.ps.late_ranks import JOB_CHECK_ROUNDS
from tests.deploy.test_manifests import CONFIGS, REPO_ROOT, validate

#: the checked-in examples whose workers train with parameter-server shards
PSERVER_EXAMPLES = ("pserver", "pserver-gpu")
#: what the shard's own parser reads in place of the StatefulSet's pod-index variable
SHARD_VARIABLE = "$(DISTCONV_SHARD)"


def _containers(obj: dict) -> list[dict]:
    return obj["spec"]["template"]["spec"]["containers"]


def shard_timeout(objs: list[dict]) -> float:
    """The ``--timeout`` the job's shards take, read by ``distconv pserver``'s own parser from
    the StatefulSet's args (so a flag left out reads as the shards' default)."""
    (statefulset,) = [o for o in objs if o["kind"] == "StatefulSet"]
    (container,) = _containers(statefulset)
    argv = container["args"]
    assert argv[:2] == ["distconv", "pserver"], argv
    parser = add_pserver(argparse.ArgumentParser().add_subparsers())
    return parser.parse_args([w.replace(SHARD_VARIABLE, "0") for w in argv[2:]]).timeout


def startup_window(container: dict) -> int:
    """How long, in seconds, ``container``'s startup probe holds liveness off at most."""
    probe = container["startupProbe"]
    return probe["periodSeconds"] * probe["failureThreshold"]


def startup_shortfalls(objs: list[dict]) -> list[str]:
    """Each worker container of the job ``objs`` whose startup probe ends before the late-rank
    rounds can (``JOB_CHECK_ROUNDS`` x the shards' ``--timeout``), named with both numbers."""
    rounds = JOB_CHECK_ROUNDS * shard_timeout(objs)
    (job,) = [o for o in objs if o["kind"] == "Job"]
    return [
        f"{job['metadata']['name']} container {c['name']}: startup probe window "
        f"{startup_window(c)} s < {JOB_CHECK_ROUNDS} rounds x the shards' --timeout = {rounds:g} s"
        for c in _containers(job)
        if startup_window(c) < rounds
    ]


def checked_in(example: str) -> list[dict]:
    """The example's manifests as read from k8s/, each valid against its schema."""
    folder = Path(REPO_ROOT) / "k8s" / example
    objs = [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))]
    assert objs, folder
    for obj in objs:
        validate(obj)
    return objs


def rendered(example: str, timeout: str | list[str]) -> list[dict]:
    """The example rendered with the workers' (so the shards') ``--timeout`` ``timeout``, or
    with the train args ``timeout`` added where it is a list."""
    config = CONFIGS[example]
    extra = ["--timeout", timeout] if isinstance(timeout, str) else timeout
    train_args = [*config["train_args"], *extra]
    objs = render_manifests(**{**config, "train_args": train_args})
    for obj in objs:
        validate(obj)
    return objs


@pytest.mark.parametrize("example", PSERVER_EXAMPLES)
def test_the_checked_in_workers_outlast_the_late_rank_rounds(example):
    objs = checked_in(example)
    assert shard_timeout(objs) == 60  # the shards' default: the examples give none
    assert startup_shortfalls(objs) == []


def test_the_docs_give_the_checked_in_window_and_how_it_derives():
    objs = checked_in("pserver")
    (job,) = [o for o in objs if o["kind"] == "Job"]
    probe = _containers(job)[0]["startupProbe"]
    window = startup_window(_containers(job)[0])
    docs = (Path(REPO_ROOT) / "docs" / "kubernetes.md").read_text()
    said = " ".join(docs.split())  # the paragraph's words, whatever its line breaks
    assert (
        f"up to {window // 60} minutes (every {probe['periodSeconds']} s, "
        f"{probe['failureThreshold']} failures)"
    ) in said
    rounds = JOB_CHECK_ROUNDS * shard_timeout(objs)
    assert window == 2 * rounds
    assert "twice a worker's longest wait for ranks late to the start-up check" in said
    assert f"{JOB_CHECK_ROUNDS} rounds of the shards' `--timeout` ({rounds:g} s" in said


def test_the_docs_give_the_window_a_longer_timeout_renders():
    """The docs said the rendered manifests kept 120 failures whatever the ``--timeout``, and
    told operators to raise them by hand: the renderer derives the window now."""
    (job,) = [o for o in rendered("pserver", ["--timeout", "300"]) if o["kind"] == "Job"]
    probe = _containers(job)[0]["startupProbe"]
    docs = (Path(REPO_ROOT) / "docs" / "kubernetes.md").read_text()
    said = " ".join(docs.split())
    window = startup_window(_containers(job)[0])
    assert f"(`--timeout 300`: {window} s, {probe['failureThreshold']} failures)" in said
    assert "whatever the `--timeout`" not in said


@pytest.mark.parametrize("example", PSERVER_EXAMPLES)
@pytest.mark.parametrize("timeout", ["20", "60", "120"])
def test_rendered_workers_outlast_the_rounds_of_their_shards_timeout(example, timeout):
    objs = rendered(example, timeout)
    assert shard_timeout(objs) == float(timeout)
    assert startup_shortfalls(objs) == []


@pytest.mark.parametrize("example", PSERVER_EXAMPLES)
def test_a_timeout_over_120_s_still_leaves_the_workers_their_rounds(example):
    """With ``--timeout 300`` the rounds take up to 3000 s: a 1200 s startup probe kills a
    worker that waits for a late rank as designed."""
    assert startup_shortfalls(rendered(example, "300")) == []


@pytest.mark.parametrize("example", PSERVER_EXAMPLES)
def test_a_shard_timeout_raised_without_the_probe_is_caught(example):
    """The relation is read from both sides: raising the StatefulSet's ``--timeout`` past
    1/``JOB_CHECK_ROUNDS`` of the probe's window, or shortening the window below the rounds,
    is named."""
    objs = checked_in(example)
    raised = copy.deepcopy(objs)
    (statefulset,) = [o for o in raised if o["kind"] == "StatefulSet"]
    _containers(statefulset)[0]["args"] += ["--timeout", "121"]
    (problem,) = startup_shortfalls(raised)
    assert "startup probe window 1200 s < 10 rounds x the shards' --timeout = 1210 s" in problem

    shortened = copy.deepcopy(objs)
    (job,) = [o for o in shortened if o["kind"] == "Job"]
    _containers(job)[0]["startupProbe"]["failureThreshold"] = 59
    (problem,) = startup_shortfalls(shortened)
    assert "startup probe window 590 s < 10 rounds x the shards' --timeout = 600 s" in problem


@pytest.mark.parametrize(
    ("given", "window"),
    [
        ([], 1200),  # the shards' default 60 s: 2 x 10 rounds x 60 s
        (["--timeout=300"], 6000),
        (["--timeout", "300"], 6000),
        (["--tim", "300"], 6000),  # an abbreviation, as train's parser reads it
        (["--timeout", "300", "--timeout", "30"], 1200),  # the last wins, as in train
        (["--timeout", "300.5"], 6010),  # 6010 s: whole 10 s periods, rounded up
        (["--timeout", "0.2"], 1200),  # the shards' least (below it, refused): the least window
    ],
)
def test_the_window_is_twice_the_rounds_of_the_timeout_in_every_form_train_reads(given, window):
    """The window is derived from the ``--timeout`` the shards are given, in each form that
    ``distconv train`` reads, not only ``--timeout N``; the relation the other tests hold is
    1x the rounds, the renderer's promise 2x."""
    objs = rendered("pserver", given)
    (job,) = [o for o in objs if o["kind"] == "Job"]
    assert startup_window(_containers(job)[0]) == window
    assert window >= 2 * JOB_CHECK_ROUNDS * shard_timeout(objs)


def test_a_huge_timeout_gives_a_threshold_the_api_server_can_decode():
    """``failureThreshold`` is an int32: ``--timeout 2e9`` rendered 4000000000 failures, a Job
    that ``kubectl apply`` refuses to decode (the 1200 s window before was always valid)."""
    (job,) = [o for o in rendered("pserver", "2e9") if o["kind"] == "Job"]
    assert _containers(job)[0]["startupProbe"]["failureThreshold"] == 2**31 - 1
