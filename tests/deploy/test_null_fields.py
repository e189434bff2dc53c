"""A field set to null in a manifest (``env:`` with nothing after it in YAML) is unset to the
API server; ``manifest_problems`` stopped on it with a TypeError or AttributeError traceback."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _nulled(kind: str, edit) -> list[str]:
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    (obj,) = [o for o in objs if o["kind"] == kind]
    edit(obj, obj["spec"]["template"]["spec"], obj["spec"]["template"]["spec"]["containers"][0])
    return manifest_problems(objs)


@pytest.mark.parametrize(
    "kind, edit",
    [
        ("Job", lambda obj, pod, c: pod.update(initContainers=None, nodeSelector=None)),
        ("Job", lambda obj, pod, c: c.update(envFrom=None, command=None)),
        ("StatefulSet", lambda obj, pod, c: obj["metadata"].update(annotations=None)),
        ("StatefulSet", lambda obj, pod, c: pod.update(securityContext={**pod["securityContext"],
                                                                       "fsGroup": None})),
    ],
)  # fmt: skip
def test_an_optional_field_set_to_null_is_unset(kind, edit):
    assert _nulled(kind, edit) == []


@pytest.mark.parametrize(
    "kind, edit, problem",
    [
        ("Job", lambda obj, pod, c: pod.update(terminationGracePeriodSeconds=None),
         "Job j-worker: terminationGracePeriodSeconds 30 < 60 s"),  # the default
        ("Job", lambda obj, pod, c: obj["metadata"].update(labels=None),
         "Job j-worker: label app.kubernetes.io/name is missing"),
        ("Job", lambda obj, pod, c: c.update(resources=None),
         "Job j-worker container worker: resources.requests.cpu is missing"),
    ],
)  # fmt: skip
def test_a_needed_field_set_to_null_is_missing(kind, edit, problem):
    assert problem in _nulled(kind, edit)
