"""A number or a list in ``metadata.name``, ``generateName`` or ``namespace`` (``namespace:
5``), which kubectl refuses, passed the check: the field types table (commit
53d977b) typed only the labels and annotations of a metadata.
"""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _worker_job_metadata(**fields) -> list[str]:
    """The problems of the rendered job, its worker Job's metadata updated by ``fields``."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["metadata"].update(fields)
    return manifest_problems(objs)


@pytest.mark.parametrize("field", ["namespace", "generateName"])
def test_a_metadata_field_that_is_a_number_is_named(field):
    assert f"Job j-worker: metadata.{field} must be a string, got 5" in _worker_job_metadata(
        **{field: 5}
    )


def test_a_name_that_is_a_number_is_named_by_its_text():
    assert _worker_job_metadata(name=5) == ["Job 5: metadata.name must be a string, got 5"]


def test_a_name_that_is_a_list_is_named():
    problems = _worker_job_metadata(name=["w"])
    assert "Job ['w']: metadata.name must be a string, got ['w']" in problems
