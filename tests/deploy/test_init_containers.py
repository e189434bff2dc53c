"""An init container runs to completion before the pod's containers start: it is no shard and
no rank, so the checks do not hold it to what those must do (keep serving, resume, answer
probes). An image's smoke test (``distconv pserver --help``, ``distconv train --help``) exits 0
and passes; a ``distconv pserver`` command line its parser refuses keeps the pod from starting
and is reported. A sidecar (``restartPolicy: Always``) runs for the pod's life, as a shard."""

from __future__ import annotations

import copy

import pytest
import yaml

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.render import EXAMPLE_TRAIN_ARGS, EXAMPLES
from distconv.deploy.walk import _templates

pytestmark = pytest.mark.timeout(60)

#: an image's smoke tests, as a user may add them to every pod
SMOKE_TESTS = """
initContainers:
  - name: smoke-pserver
    image: "distconv:0.1.0"
    command: [distconv, pserver, "--help"]
    resources: &small
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 100m, memory: 64Mi}
    securityContext: {allowPrivilegeEscalation: false}
  - name: smoke-train
    image: "distconv:0.1.0"
    command: [distconv, train, "--help"]
    resources: *small
    securityContext: {allowPrivilegeEscalation: false}
"""


def _with_init(example: str, text: str) -> list[dict]:
    """The example's objects with the init containers of the YAML ``text`` in every pod."""
    objs = copy.deepcopy(
        render_manifests(**{**EXAMPLES[example], "train_args": EXAMPLE_TRAIN_ARGS})
    )
    for obj in objs:
        for _, template in _templates(obj):
            template["spec"].update(copy.deepcopy(yaml.safe_load(text)))
    return objs


@pytest.mark.parametrize("example", ["pserver", "mpijob"])
def test_a_smoke_test_in_an_init_container_passes(example):
    assert manifest_problems(_with_init(example, SMOKE_TESTS)) == []


def test_the_shards_beside_an_init_container_are_still_held_to_serving():
    objs = _with_init("pserver", SMOKE_TESTS)
    (sts,) = [o for o in objs if o["kind"] == "StatefulSet"]
    sts["spec"]["template"]["spec"]["containers"][0]["args"].append("--help")
    assert manifest_problems(objs) == [
        f"StatefulSet {sts['metadata']['name']} container pserver: distconv pserver: "
        "-h/--help prints the usage and exits (every shard would exit)"
    ]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--workers", "two"], "argument --workers: must be an integer, got 'two'"),
        (["--workers", "4"], "the following arguments are required: --bind, --shard, --num-shards"),
    ],
)
def test_an_init_container_the_parser_refuses_keeps_the_pod_from_starting(args, words):
    objs = _with_init("pserver", SMOKE_TESTS.replace('"--help"', ", ".join(args), 1))
    problems = [p for p in manifest_problems(objs) if "container smoke-pserver" in p]
    assert len(problems) == 2 and all(
        p.endswith(f": distconv pserver: {words} (the pod would never start)") for p in problems
    ), problems
    # --help exits 0 before argparse complains of a flag it does not take
    objs = _with_init("pserver", SMOKE_TESTS.replace('"--help"', '"--bogus", "--help"', 1))
    assert manifest_problems(objs) == []


def test_a_sidecar_is_held_to_serving_as_a_shard():
    sidecar = SMOKE_TESTS.replace("command:", "restartPolicy: Always\n    command:", 1)
    problems = manifest_problems(_with_init("pserver", sidecar))
    assert "-h/--help prints the usage and exits (every shard would exit)" in "\n".join(problems)
    assert "container smoke-pserver: no container port named health" in "\n".join(problems)
