"""The ``distconv train`` values of a job are read by ``distconv train``'s own parser on both
ways to render it: ``render_manifests`` (the library) rendered ``--epochs -1`` or ``--out``
without a value into every rank's command, which ``distconv-launch k8s`` refuses."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems, render_manifests
from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)


#: train arguments every rank would refuse, and the words both renderers refuse them with
REFUSED = [
    (["--epochs", "-1"], "argument --epochs: must be >= 1, got -1"),
    (["--epochs", "x"], "argument --epochs: must be an integer, got 'x'"),
    (["--out"], "argument --out: expected one argument"),
    (["--batch-size", "0"], "argument --batch-size: must be >= 1, got 0"),
    (["--lr", "abc"], "argument --lr: must be a number, got 'abc'"),
    (["--help"], "-h/--help"),
]


def _launch_k8s(train_args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", "k8s", "--workers", "2", "--image", "d:1", "--",
         *train_args],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize("servers", [1, 0])
@pytest.mark.parametrize("train_args, words", REFUSED)
def test_render_manifests_refuses_train_values_the_ranks_refuse(train_args, words, servers):
    with pytest.raises(ValueError) as caught:
        render_manifests(job_name="j", workers=2, servers=servers, image="d:1",
                         train_args=train_args)  # fmt: skip
    assert str(caught.value).startswith(words), caught.value
    assert str(caught.value).endswith("(the train arguments after --)")


@pytest.mark.parametrize("train_args, words", REFUSED[:3])
def test_the_launcher_refuses_the_same_values(train_args, words):
    result = _launch_k8s(train_args)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert words in result.stderr


def test_good_train_values_render_on_both_ways():
    train_args = ["--epochs", "3", "--batch-size", "32", "--data", "digits"]
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1", train_args=train_args)
    assert objs[-1]["spec"]["template"]["spec"]["containers"][0]["args"][-6:] == train_args
    result = _launch_k8s(train_args)
    assert result.returncode == 0, result.stderr


def _rank_args(objs: list[dict]) -> list[str]:
    obj = objs[-1]
    if obj["kind"] == "MPIJob":
        pod = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    else:
        pod = obj["spec"]["template"]["spec"]
    return pod["containers"][0]["args"]


@pytest.mark.parametrize("servers, where", [(1, "Job j-worker"), (0, "MPIJob j Launcher")])
@pytest.mark.parametrize("train_args, words", REFUSED[:5])
def test_the_check_refuses_train_values_edited_into_a_manifest(servers, where, train_args, words):
    """A shard's command line is parsed whole by its parser; a rank's was read flag by flag:
    --epochs -1 edited into the rendered YAML passed, and every rank refused it at start."""
    objs = render_manifests(job_name="j", workers=2, servers=servers, image="d:1")
    _rank_args(objs).extend(train_args)
    assert manifest_problems(objs) == [
        f"{where} container {'worker' if servers else 'launcher'}: distconv train: {words}: "
        "every rank would refuse it"
    ]


def test_a_train_value_the_cluster_fills_in_is_not_judged():
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    _rank_args(objs).extend(["--epochs", "$(EPOCHS)"])  # envFrom may define it
    objs[-1]["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"configMapRef": {"name": "train"}}
    ]
    assert manifest_problems(objs) == []
    objs[-1]["spec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "EPOCHS", "value": "0"}
    )
    assert manifest_problems(objs) == [
        "Job j-worker container worker: distconv train: argument --epochs: must be >= 1, got 0: "
        "every rank would refuse it"
    ]


@pytest.mark.parametrize(
    "filled",
    [["--seed", "$(SEED)"], ["--seed=$(SEED)"], ["--resume", "$(SEED)"]],
    ids=["flag-value", "flag=value", "optional-value"],
)
def test_a_value_the_cluster_fills_in_leaves_the_others_judged(filled):
    """One flag whose value only the cluster knows (``--seed $(SEED)`` from a valueFrom) let
    every other value pass: ``--epochs -1`` too, which every rank refuses. That
    flag alone is left out of the parse now."""
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    container = objs[-1]["spec"]["template"]["spec"]["containers"][0]
    container["env"].append({"name": "SEED", "valueFrom": {"fieldRef": {"fieldPath": "x"}}})
    container["args"].extend(filled)
    assert manifest_problems(objs) == []
    container["args"].extend(["--epochs", "-1"])
    assert manifest_problems(objs) == [
        "Job j-worker container worker: distconv train: argument --epochs: must be >= 1, got -1: "
        "every rank would refuse it"
    ]


def test_a_token_the_cluster_fills_in_where_a_flag_may_go_leaves_the_parse_unjudged():
    """``$(ARGS)`` where a flag may go (after a value, not after a flag that takes one) may be
    any flags: nothing is judged."""
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    container = objs[-1]["spec"]["template"]["spec"]["containers"][0]
    container["env"].append({"name": "ARGS", "valueFrom": {"fieldRef": {"fieldPath": "x"}}})
    container["args"].extend(["--epochs", "-1", "$(ARGS)"])
    assert manifest_problems(objs) == []
