"""Reading a manifest file's text into its documents (JSON or YAML, each with the line it
starts on) is a module of its own, :mod:`distconv.deploy.manifest_documents`; the command
(:mod:`distconv.deploy.check_command`) reads the files and hands their text to it."""

from __future__ import annotations

import pytest

from distconv.deploy import check_command, manifest_documents
from tests.moved_names import assert_moved

READERS = ("_looks_json", "_maybe_json", "_json_documents", "_yaml_documents", "_refuse_shape")


def test_the_documents_are_read_by_their_own_module():
    assert_moved(check_command, manifest_documents, READERS)
    json_stream = b'{"kind": "Job"}\n\n{"kind": "Service",\n "a": 1e3}\n'
    assert check_command._documents("x.json", json_stream) == [
        (1, {"kind": "Job"}),
        (3, {"kind": "Service", "a": 1000.0}),
    ]
    yaml_text = b"kind: Job\n---\nkind: Service\na: 1e3\n"
    assert check_command._documents("x.yaml", yaml_text) == [
        (1, {"kind": "Job"}),
        (3, {"kind": "Service", "a": "1e3"}),  # YAML 1.1: a string
    ]
    with pytest.raises(check_command.ManifestReadError, match="document 1 .* is a list"):
        check_command._documents("x.yaml", b"- a\n")
