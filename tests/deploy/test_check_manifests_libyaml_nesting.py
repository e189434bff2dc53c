"""PyYAML 6.0.4's wheels bundle a libyaml that will nest no deeper than 1000 levels ("while
increasing flow level; exceeded maximum nesting depth"), a tenth of what kubectl reads, and
pyproject allows ``pyyaml>=6``: ``distconv check-manifests`` refused a valid deep CRD with exit
2 there. Such text is read by PyYAML's own loader instead; libyaml still reads the rest. The
refusal is made here by a loader that refuses as 6.0.4's does, whichever PyYAML is installed."""

from __future__ import annotations

import pytest
import yaml

from distconv.deploy import check_command, manifest_documents
from distconv.deploy.bounds import MAX_DEPTH
from distconv.deploy.check import manifest_problems
from tests.deploy.test_check_manifests_deep_schemas import deepest, labels_only

pytestmark = pytest.mark.timeout(120)

#: how deep the libyaml of PyYAML 6.0.4's wheels nests
LIBYAML_LEVELS = 1000


def _levels(text: str) -> int:
    """How deep ``text`` nests, by PyYAML's own parser (no recursion), as far as it reads."""
    depth = deepest_seen = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                deepest_seen = max(deepest_seen, depth)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        pass  # the loader itself says what is wrong
    return deepest_seen


@pytest.fixture
def libyaml_604(monkeypatch):
    """check-manifests' fast loader made to refuse what nests past 1000 levels, as 6.0.4's."""

    class Refusing(manifest_documents._Loader):
        def __init__(self, stream: str) -> None:
            if _levels(stream) > LIBYAML_LEVELS:
                raise yaml.scanner.ScannerError(
                    "while increasing flow level", None, "exceeded maximum nesting depth", None
                )
            super().__init__(stream)

    monkeypatch.setattr(manifest_documents, "_Loader", Refusing)


def _read(text: str) -> list:
    return [doc for _, doc in check_command._documents("crd.yaml", text.encode())]


def test_a_crd_libyaml_will_not_nest_is_read_by_pyyamls_own_loader(libyaml_604):
    for text in (deepest().replace('"', ""), _block(1500)):
        assert labels_only(manifest_problems(_read(text)))


def test_past_the_bound_it_is_still_refused_as_nested_too_deep(libyaml_604):
    with pytest.raises(check_command.ManifestReadError, match=f"deeper than {MAX_DEPTH} levels"):
        _read(deepest(1).replace('"', ""))


def test_other_yaml_errors_are_libyamls_and_not_read_again(libyaml_604, monkeypatch):
    monkeypatch.setattr(manifest_documents, "_PyLoader", None)  # any use of it fails
    with pytest.raises(check_command.ManifestReadError, match="line 2, column 1: while parsing"):
        _read("a: [b\n")
    assert labels_only(manifest_problems(_read(_block(LIBYAML_LEVELS - 10))))


def _block(levels: int) -> str:
    """A ConfigMap whose data holds block mappings nested ``levels`` deep in all."""
    inner = "".join(f"\n{'  ' * n}k:" for n in range(2, levels)) + " v"
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:{inner}\n"
