"""A field of a type the API server refuses (or an entry without a field it needs) stopped the
check with a traceback wherever it was read: a Job, StatefulSet or Service without ``spec`` or
with a ``spec`` that is no mapping (``KeyError``, ``AttributeError``), ``metadata.labels`` that
is no mapping, an ``env`` entry that is a number, a volume mount without ``mountPath``, ... so
nothing else was judged. Each is now named once, as a line, and the rest is judged as if the
field were not written."""

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


#: the path of a Job's or a StatefulSet's first container, from the object
CONTAINER = ("spec", "template", "spec", "containers", 0)
POD = ("spec", "template", "spec")


def _dotted(path: tuple) -> str:
    """How a line names the field at ``path``: ``spec.template.spec.containers[0].env``."""
    return "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path)[1:]


def _typed(kind: str, path: tuple, value: object, expected: str) -> tuple:
    """A row of :data:`FIELDS`: the field at ``path`` set to ``value``, not ``expected``."""
    return kind, path, value, f"{_dotted(path)} must be {expected}, got {value!r}"


def _missing(kind: str, path: tuple) -> tuple:
    """A row of :data:`FIELDS`: the field at ``path`` deleted from an entry that needs it."""
    return kind, path, None, f"{_dotted(path[:-1])} has no {path[-1]}, which the API server needs"


#: (kind, path from the object, value, the line named); ``None`` deletes the last key
FIELDS = [
    _typed("Job", ("spec", "template"), "x", "a mapping"),
    _typed("Job", POD, [], "a mapping"),
    _typed("Job", (*POD, "containers"), "x", "a list"),
    _typed("Job", CONTAINER, 5, "a mapping"),
    _typed("Job", (*CONTAINER, "env"), {}, "a list"),
    _typed("Job", (*CONTAINER, "env", 0), 5, "a mapping"),
    _typed("Job", (*CONTAINER, "env", 0, "value"), ["x"], "a string"),
    _missing("Job", (*CONTAINER, "env", 0, "name")),
    _typed("Job", (*CONTAINER, "args"), 5, "a list"),
    _typed("Job", (*CONTAINER, "workingDir"), 5, "a string"),
    _typed("Job", (*CONTAINER, "resources"), "x", "a mapping"),
    _typed("Job", (*CONTAINER, "resources", "limits"), [], "a mapping"),
    _typed("Job", (*CONTAINER, "securityContext"), 5, "a mapping"),
    _typed("Job", (*CONTAINER, "readinessProbe"), "x", "a mapping"),
    _typed("Job", (*CONTAINER, "readinessProbe", "httpGet"), 5, "a mapping"),
    _missing("Job", (*CONTAINER, "ports", 0, "containerPort")),
    _typed("Job", (*CONTAINER, "ports", 0, "name"), [], "a string"),
    _missing("Job", (*CONTAINER, "volumeMounts", 0, "mountPath")),
    _typed("Job", (*CONTAINER, "volumeMounts", 0, "mountPath"), 5, "a string"),
    _typed("Job", (*POD, "securityContext"), "x", "a mapping"),
    _typed("Job", (*POD, "volumes"), 5, "a list"),
    _missing("Job", (*POD, "volumes", 0, "name")),
    _typed("StatefulSet", ("spec", "serviceName"), ["x"], "a string"),
    _typed("StatefulSet", (*POD, "volumes", 1, "secret"), "x", "a mapping"),
    _typed("Service", ("spec", "selector"), "x", "a mapping"),
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
