"""check-manifests' loader drops a mapping's repeated keys while it merges; a key no dict can
hold (a list, which the loader refuses) is one key per node, and never the same key as any
scalar, whatever its value."""

from __future__ import annotations

import pytest
import yaml

from distconv.deploy.bounds import each_key_once
from distconv.deploy.manifest_documents import _Loader

pytestmark = pytest.mark.timeout(60)


def node(tag: str, value: str) -> yaml.ScalarNode:
    """A scalar node of YAML's core ``tag`` (``int``, ``str``)."""
    return yaml.ScalarNode(f"tag:yaml.org,2002:{tag}", value)


def test_a_list_key_is_never_the_same_key_as_an_int():
    """An int key whose value is the id of a list key's node stays a key of its own: were
    the two one key, the list's pair (the one the loader refuses) could be dropped, and a
    document yaml.safe_load refuses read."""
    listed = yaml.SequenceNode("tag:yaml.org,2002:seq", [])
    number = node("int", str(id(listed)))
    pairs = [(number, node("str", "a")), (listed, node("str", "b"))]
    assert each_key_once(pairs, _Loader("")._dict_key) == pairs


def test_a_list_key_and_its_alias_are_one_key():
    """The same list key node twice (an alias) is one key, the last value kept."""
    listed = yaml.SequenceNode("tag:yaml.org,2002:seq", [])
    first, last = node("str", "a"), node("str", "b")
    kept = each_key_once([(listed, first), (listed, last)], _Loader("")._dict_key)
    assert kept == [(listed, last)]
