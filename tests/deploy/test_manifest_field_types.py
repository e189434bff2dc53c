"""A field of a type the API server refuses (or an entry without a field it needs) stopped the
check with a traceback wherever it was read: a Job, StatefulSet or Service without ``spec`` or
with a ``spec`` that is no mapping (``KeyError``, ``AttributeError``), ``metadata.labels`` that
is no mapping, an ``env`` entry that is a number, a volume mount without ``mountPath``, ... so
nothing else was judged. Each is now named once, as a line, and the rest is judged as if the
field were not written (review k299)."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

VALUES = ["x", [], 5]
NAMES = {"Job": "j-worker", "StatefulSet": "j-pserver", "Service": "j-pserver"}


def _rendered(**options) -> list[dict]:
    options = {"job_name": "j", "workers": 2, "servers": 1, "image": "d:1", **options}
    return copy.deepcopy(render_manifests(**options))


def _one(objs: list[dict], kind: str) -> dict:
    (obj,) = [o for o in objs if o["kind"] == kind]
    return obj


@pytest.mark.parametrize("kind", ["Job", "StatefulSet", "Service"])
def test_an_object_without_spec_is_named_once(kind):
    objs = _rendered()
    del _one(objs, kind)["spec"]
    problems = manifest_problems(objs)
    line = f"{kind} {NAMES[kind]}: spec is missing: the API server refuses a {kind} without one"
    assert problems.count(line) == 1


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("kind", ["Job", "StatefulSet", "Service"])
def test_a_spec_that_is_no_mapping_is_named_once(kind, value):
    objs = _rendered()
    _one(objs, kind)["spec"] = value
    problems = manifest_problems(objs)
    assert problems.count(f"{kind} {NAMES[kind]}: spec must be a mapping, got {value!r}") == 1
    # the rest is judged as the object without its spec: the Job restarts as a Pod does
    if kind == "Job":
        assert "Job j-worker: restartPolicy must be Never or OnFailure, got None" in problems


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("kind", ["Job", "StatefulSet", "Service"])
def test_labels_that_are_no_mapping_are_named_once(kind, value):
    objs = _rendered()
    _one(objs, kind)["metadata"]["labels"] = value
    problems = manifest_problems(objs)
    line = f"{kind} {NAMES[kind]}: metadata.labels must be a mapping, got {value!r}"
    assert problems.count(line) == 1
    assert f"{kind} {NAMES[kind]}: label app.kubernetes.io/name is missing" in problems


def test_a_pod_templates_labels_that_are_no_mapping_are_named():
    objs = _rendered()
    _one(objs, "StatefulSet")["spec"]["template"]["metadata"]["labels"] = ["a"]
    problems = manifest_problems(objs)
    line = "StatefulSet j-pserver: spec.template.metadata.labels must be a mapping, got ['a']"
    assert problems.count(line) == 1
    # the Service's selector no longer matches the pods it names
    assert any("selector does not match the pods" in p for p in problems)


#: (kind, path from the object, value, the line named); ``None`` deletes the last key
CONTAINER = ("spec", "template", "spec", "containers", 0)
C0 = "spec.template.spec.containers[0]"
FIELDS = [
    ("Job", ("spec", "template"), "x", "spec.template must be a mapping, got 'x'"),
    ("Job", ("spec", "template", "spec"), [], "spec.template.spec must be a mapping, got []"),
    ("Job", (*CONTAINER[:-1],), "x", "spec.template.spec.containers must be a list, got 'x'"),
    ("Job", (*CONTAINER,), 5, "spec.template.spec.containers[0] must be a mapping, got 5"),
    ("Job", (*CONTAINER, "env"), {}, f"{C0}.env must be a list, got {{}}"),
    (
        "Job",
        (*CONTAINER, "env", 0),
        5,
        f"{C0}.env[0] must be a mapping, got 5",
    ),
    (
        "Job",
        (*CONTAINER, "env", 0, "value"),
        ["x"],
        f"{C0}.env[0].value must be a string, got ['x']",
    ),
    (
        "Job",
        (*CONTAINER, "env", 0, "name"),
        None,
        f"{C0}.env[0] has no name, which the API server needs",
    ),
    ("Job", (*CONTAINER, "args"), 5, f"{C0}.args must be a list, got 5"),
    (
        "Job",
        (*CONTAINER, "workingDir"),
        5,
        f"{C0}.workingDir must be a string, got 5",
    ),
    (
        "Job",
        (*CONTAINER, "resources"),
        "x",
        f"{C0}.resources must be a mapping, got 'x'",
    ),
    (
        "Job",
        (*CONTAINER, "resources", "limits"),
        [],
        f"{C0}.resources.limits must be a mapping, got []",
    ),
    (
        "Job",
        (*CONTAINER, "securityContext"),
        5,
        f"{C0}.securityContext must be a mapping, got 5",
    ),
    (
        "Job",
        (*CONTAINER, "readinessProbe"),
        "x",
        f"{C0}.readinessProbe must be a mapping, got 'x'",
    ),
    (
        "Job",
        (*CONTAINER, "readinessProbe", "httpGet"),
        5,
        f"{C0}.readinessProbe.httpGet must be a mapping, got 5",
    ),
    (
        "Job",
        (*CONTAINER, "ports", 0, "containerPort"),
        None,
        f"{C0}.ports[0] has no containerPort, which the API server needs",
    ),
    (
        "Job",
        (*CONTAINER, "ports", 0, "name"),
        [],
        f"{C0}.ports[0].name must be a string, got []",
    ),
    (
        "Job",
        (*CONTAINER, "volumeMounts", 0, "mountPath"),
        None,
        f"{C0}.volumeMounts[0] has no mountPath, which the API server needs",
    ),
    (
        "Job",
        (*CONTAINER, "volumeMounts", 0, "mountPath"),
        5,
        f"{C0}.volumeMounts[0].mountPath must be a string, got 5",
    ),
    (
        "Job",
        ("spec", "template", "spec", "securityContext"),
        "x",
        "spec.template.spec.securityContext must be a mapping, got 'x'",
    ),
    (
        "Job",
        ("spec", "template", "spec", "volumes"),
        5,
        "spec.template.spec.volumes must be a list, got 5",
    ),
    (
        "Job",
        ("spec", "template", "spec", "volumes", 0, "name"),
        None,
        "spec.template.spec.volumes[0] has no name, which the API server needs",
    ),
    ("StatefulSet", ("spec", "serviceName"), ["x"], "spec.serviceName must be a string, got ['x']"),
    (
        "StatefulSet",
        ("spec", "template", "spec", "volumes", 1, "secret"),
        "x",
        "spec.template.spec.volumes[1].secret must be a mapping, got 'x'",
    ),
    ("Service", ("spec", "selector"), "x", "spec.selector must be a mapping, got 'x'"),
]


@pytest.mark.parametrize(("kind", "path", "value", "line"), FIELDS)
def test_a_field_of_another_type_is_named_once(kind, path, value, line):
    objs = _rendered()
    node = _one(objs, kind)
    for key in path[:-1]:
        node = node[key]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    problems = manifest_problems(objs)
    assert problems.count(f"{kind} {NAMES[kind]}: {line}") == 1


def test_an_mpi_workers_hook_command_of_numbers_is_named():
    objs = _rendered(mpi=True, servers=0)
    worker = _one(objs, "MPIJob")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    worker["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"] = [5]
    problems = manifest_problems(objs)
    line = (
        "MPIJob j: spec.mpiReplicaSpecs.Worker.template.spec.containers[0].lifecycle.preStop"
        ".exec.command[0] must be a string, got 5"
    )
    assert line in problems


def test_the_generated_manifests_have_no_problem():
    assert manifest_problems(_rendered()) == []
    assert manifest_problems(_rendered(mpi=True, servers=0)) == []
