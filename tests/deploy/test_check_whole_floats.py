"""A whole number written as a float (``containerPort: 8080.0``) reaches the API server as an
integer (kubectl turns the YAML into JSON with Go's json.Marshal, which writes 8080), and
counts.py takes it so for replicas and completions; the field types table
(commit 53d977b) refused it for ``containerPort``, and judged the pod as if the port were not
written."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _shards_ports(value) -> list[str]:
    """The problems of the rendered job whose shards' ports are written as ``value(port)``."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    for port in shards["spec"]["template"]["spec"]["containers"][0]["ports"]:
        port["containerPort"] = value(port["containerPort"])
    return manifest_problems(objs)


def test_a_container_port_written_as_a_whole_float_passes():
    assert _shards_ports(float) == []


def test_a_container_port_with_a_fraction_is_still_named():
    problems = _shards_ports(lambda port: port + 0.5)
    where = "StatefulSet j-pserver: spec.template.spec.containers[0].ports[0].containerPort"
    assert f"{where} must be an integer, got 5555.5" in problems


def test_a_container_port_written_as_text_is_still_named():
    problems = _shards_ports(str)
    where = "StatefulSet j-pserver: spec.template.spec.containers[0].ports[0].containerPort"
    assert f"{where} must be an integer, got '5555'" in problems
