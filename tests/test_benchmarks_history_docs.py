"""docs/benchmarks.md's allreduce rows cite runs that docs/benchmarks-history.md must hold: the
page says every figure comes from that log, and three runs it cited were in no row of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: a run's time, with its date where the cell gives one: ``12-06 18:25`` or ``15:35``
STAMP = re.compile(r"\b(?:\d\d-\d\d )?\d\d:\d\d\b")


def _allreduce_rows() -> list[str]:
    """The "Where we stand" rows of issue 10's targets (their first cell ends ``[10]``)."""
    text = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if re.match(r"\| [^|]*\[10\] \|", line)]


@pytest.mark.timeout(30)
def test_every_run_the_allreduce_rows_cite_is_in_the_history():
    rows = _allreduce_rows()
    assert len(rows) >= 5, "the allreduce rows of docs/benchmarks.md were not found"
    history = (DOCS / "benchmarks-history.md").read_text(encoding="utf-8")
    cited = {stamp for row in rows for stamp in STAMP.findall(row)}
    assert any(" " in stamp for stamp in cited)  # dated runs among them: the pattern reads them
    assert sorted(stamp for stamp in cited if stamp not in history) == []
