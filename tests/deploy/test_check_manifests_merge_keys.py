"""check-manifests' YAML loader reads merge keys (``<<``) exactly as ``yaml.safe_load`` does.

The loader drops each mapping's repeated keys while it merges (so that merges repeated through
aliases cannot grow without bound); these documents, small and generated, say that the result
is still the one PyYAML gives, key order and which value wins included.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from distconv.deploy.check_command import _Loader

#: spellings of keys, several of which a dict takes for one (1, 0x1 and 1.0; ~ and null; ...)
KEYS = ["a", "b", "'a'", "1", "0x1", "1.0", "~", "null", "yes", "true", ".nan", "2001-01-01"]
#: a mapping's own keys (``1: 7, 0x1: 2``), repeats included
PAIRS = st.lists(st.builds("{}: {}".format, st.sampled_from(KEYS), st.integers(0, 9)), max_size=4)


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
    assert loaded(text, _Loader) == loaded(text, yaml.SafeLoader), text


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
