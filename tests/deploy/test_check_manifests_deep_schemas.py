"""A manifest nested as deep as kubectl reads: a CRD's ``openAPIV3Schema`` has no
``$ref``, so one for a recursive type inlines each level it allows (``properties: {children:
{items: {properties: ...}}}``), and reaches hundreds of levels. ``distconv check-manifests``
refused anything past 100 levels, which kubectl (Go's JSON and YAML: 10000) applies, and
:func:`~distconv.deploy.walk.as_applied` and the List walkers recursed once a level, a
RecursionError past Python's limit (1000)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distconv.deploy import bounds, check_command
from distconv.deploy.bounds import MAX_DEPTH
from distconv.deploy.check import manifest_problems
from tests.deploy.test_check_manifests_command import check

pytestmark = pytest.mark.timeout(120)


def deep_crd(schema: object) -> dict:
    """A CRD of one version whose ``openAPIV3Schema`` is ``schema``."""
    version = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "trees.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "versions": [version]},
    }


def deep_schema(levels: int) -> dict:
    """A schema of ``levels`` objects (two levels each) nested in one another."""
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"child": schema}}
    return schema


def deep_crd_text(levels: int) -> str:
    """:func:`deep_crd` of :func:`deep_schema` as JSON text (``json.dumps`` recurses)."""
    opened = '{"type": "object", "properties": {"child": ' * levels
    schema = opened + '{"type": "string"}' + "}}" * levels
    return json.dumps(deep_crd("SCHEMA")).replace('"SCHEMA"', schema)


#: as deep as kubectl reads (10000 levels): the document's own levels around the schema's
LEVELS = 4990


def labels_only(lines: list[str]) -> bool:
    """Whether each problem line is one of the three missing labels (the CRD is unlabelled)."""
    return len(lines) == 3 and all("label app.kubernetes.io/" in line for line in lines)


def test_the_bound_is_kubectls():
    assert MAX_DEPTH == 10_000 and 2 * LEVELS + 10 <= MAX_DEPTH


def test_a_deep_schema_is_checked_by_manifest_problems():
    assert labels_only(manifest_problems([deep_crd(deep_schema(LEVELS))]))


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_deep_schema_is_read_by_the_command(tmp_path, suffix):
    """JSON, and YAML in flow style (block style this deep is past the 64 MiB read)."""
    text = deep_crd_text(LEVELS)
    path = tmp_path / f"crd{suffix}"
    path.write_text(text if suffix == ".json" else "# flow\n" + text.replace('"', ""))
    status, out, err = check(str(path))
    assert (status, err) == (1, ""), err
    assert labels_only(out.splitlines()), out


def test_lists_nested_deep_are_read():
    """A List in a List ... (``kind: List`` items may be Lists): each level walked in turn."""
    doc: dict = {"kind": "ConfigMap", "metadata": {"name": "c"}}
    for _ in range(LEVELS):
        doc = {"kind": "List", "items": [doc]}
    assert labels_only(manifest_problems([doc]))


def deepest(extra: int = 0) -> str:
    """:func:`deep_crd_text` nested :data:`MAX_DEPTH` levels deep (``extra`` more): 6 levels
    around the schema (the CRD, spec, versions, one version, schema, openAPIV3Schema's
    object), 2 for each of its objects, 1 for the innermost."""
    return deep_crd_text((MAX_DEPTH - 6) // 2 + extra)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_schema_exactly_as_deep_as_the_bound_is_read_and_one_deeper_refused(tmp_path, suffix):
    """In a process of its own (a C stack overflow would fail this test, not end the run): on
    Python 3.12 and 3.13 json's C scanner ran out of its own recursion bound (3.12: 5000
    levels), which sys.setrecursionlimit does not raise: refused as nested too deep."""
    for extra, expected in ((0, 1), (1, 2)):
        text = deepest(extra)
        path = tmp_path / f"crd{extra}{suffix}"
        path.write_text(text if suffix == ".json" else "# flow\n" + text.replace('"', ""))
        status, out, err = check(str(path))
        assert status == expected, (out, err)
        if expected == 1:
            assert labels_only(out.splitlines()), out
        else:
            assert err.endswith(f"is nested deeper than {MAX_DEPTH} levels\n"), err


def test_json_the_c_scanner_cannot_nest_is_decoded_in_python(monkeypatch, tmp_path):
    """Where json's C scanner runs out of C recursion (Python 3.12 and later bound it apart
    from the recursion limit), the document is still read, by json's Python scanner."""

    def out_of_c_stack(text: str, start: int) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    for module in (bounds, check_command):  # whichever holds json's C decoder
        if isinstance(getattr(module, "_JSON", None), json.JSONDecoder):
            monkeypatch.setattr(module._JSON, "scan_once", out_of_c_stack)
    docs = check_command._documents("crd.json", deepest().encode())
    assert [line for line, _ in docs] == [1]
    assert labels_only(manifest_problems([doc for _, doc in docs]))
