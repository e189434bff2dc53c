"""A number (or a boolean) where Kubernetes takes only text passed the check as its text:
``value: 2`` in an ``env`` entry, ``args: [--epochs, 3]``. ``kubectl apply`` refuses both
(``cannot unmarshal number into Go struct field EnvVar...value of type string``), so the job
never starts; the check now names each, once, and judges the rest as the text meant.
"""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

C0 = "spec.template.spec.containers[0]"


def _worker() -> tuple[list[dict], dict]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    return objs, job["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(("value", "shown"), [(2, "2"), (2.0, "2.0"), (True, "True")])
def test_an_env_value_that_is_no_string_is_named_once(value, shown):
    objs, container = _worker()
    (index,) = [i for i, var in enumerate(container["env"]) if var["name"] == "DISTCONV_WORLD_SIZE"]
    container["env"][index]["value"] = value
    line = f"Job j-worker: {C0}.env[{index}].value must be a string, got {shown}"
    problems = manifest_problems(objs)
    assert problems.count(line) == 1
    if shown == "2":  # judged as "2", the world size the Job runs: nothing else is named
        assert problems == [line]


def test_an_argument_that_is_a_number_is_named_and_read_as_its_text():
    objs, container = _worker()
    index = container["args"].index("8080")  # --health-port 8080
    container["args"][index] = 8080
    assert manifest_problems(objs) == [
        f"Job j-worker: {C0}.args[{index}] must be a string, got 8080"
    ]


def test_a_command_word_that_is_a_number_is_named():
    objs, container = _worker()
    container["command"] = ["nice", "-n", 5, *container.get("command", [])]
    assert f"Job j-worker: {C0}.command[2] must be a string, got 5" in manifest_problems(objs)
