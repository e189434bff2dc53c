"""A date where Kubernetes takes text (``value: 2024-01-01`` in an env entry, ``args: [--since,
2024-01-01]``) is text to kubectl: sigs.k8s.io/yaml decodes with go-yaml v2, which gives a
timestamp-like plain scalar as its string "for backward compatibility". PyYAML gives a
``datetime.date``, which the field types table (commit 53d977b) named as no
string and dropped, so a manifest kubectl applies was refused, and its args judged without
the word."""

from __future__ import annotations

import copy

import pytest
import yaml

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _loaded_with(env_value: str, sidecar_args: str) -> list[dict]:
    """The rendered job as YAML text, its rank given an env entry ``DATE: <env_value>`` and a
    sidecar whose args are ``sidecar_args``, each written as is, read back by PyYAML."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    rank = pod["containers"][0]
    rank["env"].append({"name": "DATE", "value": "@ENV@"})
    sidecar = {
        key: value
        for key, value in rank.items()
        if key not in ("env", "ports", "readinessProbe", "livenessProbe", "startupProbe")
    }
    pod["containers"].append({**sidecar, "name": "log", "command": ["ship"], "args": ["@ARGS@"]})
    text = yaml.safe_dump_all(objs).replace("'@ENV@'", env_value)
    return list(yaml.safe_load_all(text.replace("- '@ARGS@'", sidecar_args)))


@pytest.mark.parametrize("date", ["2024-01-01", "2024-01-01T10:00:00Z"])
def test_a_date_where_text_goes_passes(date):
    assert manifest_problems(_loaded_with(date, f"- --since\n        - {date}")) == []


def test_a_number_where_text_goes_is_still_named():
    problems = manifest_problems(_loaded_with("2", "- --since\n        - 2024-01-01"))
    assert len(problems) == 1
    assert problems[0].startswith("Job j-worker: spec.template.spec.containers[0].env[")
    assert problems[0].endswith("].value must be a string, got 2")
