"""The YAML loaders ``distconv check-manifests`` reads manifests with: PyYAML's safe ones, with
merge keys (``<<``) read as YAML's merge type says and kubectl reads them, whichever PyYAML is
installed, and each merged mapping's key kept once."""

from __future__ import annotations

from collections.abc import Hashable

import yaml

from distconv.deploy.bounds import each_key_once

#: libyaml's loader where PyYAML has it (4 times as fast), safe in both
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE = "tag:yaml.org,2002:merge"


def merged_pairs(loader: yaml.SafeLoader, node: yaml.MappingNode) -> list:
    """``node``'s pairs with its ``<<`` keys' mappings merged in, as PyYAML up to 6.0.3 merged
    them: merged pairs before its own, and of ``<<: [*a, *b]`` those of ``b`` before ``a``'s,
    so that, a dict keeping each key's last value, its own keys win, then ``a``'s over ``b``'s
    (YAML's merge type; Go's YAML, kubectl's, alike). PyYAML 6.0.4 lets ``b``'s win where the
    key is more than one character (it drops repeats by the id of the key's text)."""
    merged: list = []
    index = 0
    while index < len(node.value):
        key, value = node.value[index]
        if key.tag != _MERGE:
            if key.tag == "tag:yaml.org,2002:value":
                key.tag = "tag:yaml.org,2002:str"
            index += 1
            continue
        del node.value[index]  # first, as PyYAML: ``&m {<<: *m}`` then merges nothing more
        listed = isinstance(value, yaml.SequenceNode)
        sources = value.value if listed else [value]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):  # PyYAML's words
                wanted = "a mapping" if listed else "a mapping or list of mappings"
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"expected {wanted} for merging, but found {source.id}",
                    source.start_mark,
                )
            loader.flatten_mapping(source)
        for source in reversed(sources):
            merged.extend(source.value)
    return merged + node.value


class _EachKeyOnce:
    """A safe loader's part that merges as :func:`merged_pairs` says and keeps each key once.

    PyYAML's ``flatten_mapping`` appends every merged mapping's pairs, repeats and all, and
    the dict built from them keeps one of each key: nine levels of ``<<: [*m, *m, ...]`` (nine
    each) made lists of 9**10 pairs (5 GB, past a minute) before any check could measure the
    document. Each level is flattened here with its repeats dropped as the dict would drop
    them, so it holds no more pairs than the keys it has.
    """

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Merge ``node``'s ``<<`` keys into it, then drop its repeated keys."""
        node.value = each_key_once(merged_pairs(self, node), self._dict_key)  # type: ignore[arg-type]

    def _dict_key(self, key: yaml.Node) -> Hashable:
        """What the dict built from ``node.value`` takes ``key`` for: its value (``1``, ``0x1``
        are one key), or, where no dict can hold that (a list; the loader refuses it), the node
        itself, equal to no value (its id is an int): its aliases are one key, no scalar is."""
        if isinstance(key, yaml.ScalarNode):
            value = self.construct_object(key)  # type: ignore[attr-defined]
            if isinstance(value, Hashable):
                return value
        return key


class Loader(_EachKeyOnce, _SAFE_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader (libyaml's where PyYAML has it), merging as :func:`merged_pairs` says."""


class PyLoader(_EachKeyOnce, yaml.SafeLoader):
    """PyYAML's own safe loader, merging alike: for what libyaml will not nest."""
