"""check-manifests' YAML loader reads merge keys (``<<``) as ``yaml.safe_load`` of PyYAML up
to 6.0.3 does, YAML's merge type (kubectl's Go YAML alike), whichever PyYAML is installed.

The loader drops each mapping's repeated keys while it merges (so that merges repeated through
aliases cannot grow without bound); these documents, small and generated, say that the result
is still the one merging without dropping gives, key order and which value wins included.
PyYAML 6.0.4 merges otherwise (``<<: [*a, *b]``: ``b``'s key wins where it is longer than one
character), and the loader no longer follows whichever merging PyYAML has.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from distconv.deploy.manifest_documents import _Loader
from distconv.deploy.yaml_loader import merged_pairs

#: spellings of keys, several of which a dict takes for one (1, 0x1 and 1.0; ~ and null; ...)
KEYS = ["a", "b", "'a'", "1", "0x1", "1.0", "~", "null", "yes", "true", ".nan", "2001-01-01"]
#: a mapping's own keys (``1: 7, 0x1: 2``), repeats included
PAIRS = st.lists(st.builds("{}: {}".format, st.sampled_from(KEYS), st.integers(0, 9)), max_size=4)


class Merging(yaml.SafeLoader):
    """PyYAML's own safe loader merging as 6.0.3's does, repeated keys kept (up to 6.0.3, the
    same as ``yaml.SafeLoader``)."""

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        node.value = merged_pairs(self, node)


def loaded(text: str, loader: type) -> str:
    """What ``loader`` makes of ``text``: its repr (key order shows) or the error's kind."""
    try:
        return repr(yaml.load(text, Loader=loader))  # noqa: S506 - both loaders are safe
    except yaml.YAMLError as exc:
        return type(exc).__name__


@st.composite
def merge_documents(draw: st.DrawFn) -> str:
    """A mapping of anchored mappings ``m<i>``, each merging itself or earlier ones (one alias,
    a list of aliases, an inline mapping that merges too; none, one or two ``<<`` keys) and
    setting keys of its own, repeats included, in any order."""

    def merge(last: int) -> str:
        alias = st.integers(0, last).map(lambda i: f"*m{i}")
        inline = st.builds(lambda a, own: "{" + ", ".join([f"<<: {a}", *own]) + "}", alias, PAIRS)
        listed = st.lists(alias | inline, max_size=4).map(lambda v: f"[{', '.join(v)}]")
        return f"<<: {draw(alias | inline | listed)}"

    lines = []
    for i in range(draw(st.integers(1, 5))):
        merges = [merge(i) for _ in range(draw(st.integers(0, 2)))]
        body = draw(st.permutations(draw(PAIRS) + merges))
        lines.append(f"m{i}: &m{i} {{{', '.join(body)}}}")
    return "".join(f"{line}\n" for line in lines)


@pytest.mark.timeout(120)
# the same 400 documents on every run: a CI failure is one anyone can rerun, none comes and goes
@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(merge_documents())
def test_merges_read_as_yaml_safe_load_reads_them(text):
    """Explicit keys over merged ones, the first merged mapping over later ones, nested
    merges, keys a dict takes for one (``1`` and ``0x1``): the same result, in the same order."""
    assert loaded(text, _Loader) == loaded(text, Merging), text


@pytest.mark.skipif(
    tuple(int(part) for part in yaml.__version__.split(".")[:3]) > (6, 0, 3),
    reason="PyYAML 6.0.4 merges otherwise",
)
@pytest.mark.timeout(120)
@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(merge_documents())
def test_the_merging_compared_with_is_pyyamls_up_to_6_0_3(text):
    assert loaded(text, Merging) == loaded(text, yaml.SafeLoader), text


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {1: x, 0x1: y}\njob: {<<: *b, 1: mine}\n",
        "job: {<<: {~: x, null: y}, ~: mine}\n",
        "job: {1: x, 1.0: y, 1: mine}\n",
    ],
)
def test_an_explicit_key_wins_over_a_merged_one_spelt_otherwise(text):
    """A key of the mapping itself wins over a merged key a dict takes for the same: ``1`` over
    ``0x1``. Dropping repeats by spelling kept the merged value ('y', not 'mine')."""
    assert yaml.load(text, Loader=_Loader)["job"] == {  # noqa: S506 - _Loader is safe
        next(iter(yaml.safe_load(text)["job"])): "mine"
    }


def _later_wins(loader: yaml.SafeLoader, node: yaml.MappingNode) -> None:
    """Merging as PyYAML 6.0.4 does with keys longer than one character: a later mapping's
    key over an earlier one's, the mapping's own over both."""
    merged, own = [], []
    for key, value in node.value:
        if key.tag != "tag:yaml.org,2002:merge":
            own.append((key, value))
            continue
        for source in value.value if isinstance(value, yaml.SequenceNode) else [value]:
            loader.flatten_mapping(source)
            merged.extend(source.value)
    node.value = merged + own


@pytest.mark.parametrize(
    ("text", "job"),
    [
        ("a: &a {ab: 1}\nb: &b {ab: 2}\njob: {<<: [*a, *b]}\n", {"ab": 1}),
        (
            "a: &a {image: x}\nb: &b {image: y, tag: t}\njob: {<<: [*a, *b]}\n",
            {"image": "x", "tag": "t"},
        ),
        ("job: {<<: [{ab: 1}, {ab: 2}], cd: 3}\n", {"ab": 1, "cd": 3}),
    ],
)
def test_the_first_merged_mapping_wins_whatever_pyyaml_merges_as(monkeypatch, text, job):
    """PyYAML 6.0.4's merging (stood in for here) lets ``<<: [*a, *b]`` take ``b``'s key:
    the check would judge a value kubectl never applies. The loader merges on its own."""
    monkeypatch.setattr(yaml.constructor.SafeConstructor, "flatten_mapping", _later_wins)
    assert yaml.load(text, Loader=_Loader)["job"] == job  # noqa: S506 - _Loader is safe
