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


#: a figure in a row's text: ``1.16``, ``−16`` (as ``-16``), ``7.0`` of ``7.0×``; not the 16 of
#: ``float16``
FIGURE = re.compile(r"(?<![\w.])[-−]?\d+(?:\.\d+)?(?![\w.])")
#: the history's table of the Xeon 167's runs: a row is ``| MM-DD HH:MM | ... |``
RUN_ROW = re.compile(r"^\| (\d\d-\d\d \d\d:\d\d) \|(.*)$", re.M)


def _figures(text: str) -> set[str]:
    return {f.replace("−", "-") for f in FIGURE.findall(re.sub(r"\bload [\d.]+", "", text))}


@pytest.mark.timeout(30)
def test_every_figure_the_allreduce_rows_give_a_run_of_the_xeon_167_is_in_its_history_row():
    """The page says every figure comes from the history: those it gives a run that has a row
    of its own there must be in that row (the sleeps' excess and the 16-bit wires' time were
    in none)."""
    history = (DOCS / "benchmarks-history.md").read_text(encoding="utf-8")
    section = history[history.index("## Issue 10 on the Xeon 167, run by run") :]
    runs = {when: _figures(cells) for when, cells in RUN_ROW.findall(section)}
    assert len(runs) >= 7, "the history's rows of the Xeon 167's runs were not found"
    checked = 0
    for row in _allreduce_rows():
        latest = row.split(" | ")[1]  # the Xeon 167's runs first (the page's header)
        parts = STAMP.split(latest)
        date = None
        for stamp, text in zip(STAMP.findall(latest), parts[1:]):
            date = stamp[:5] if " " in stamp else date  # an undated time: the date before it
            when = f"{date} {stamp[-5:]}"
            if when not in runs:
                continue
            figures = _figures(text)
            checked += 1
            assert figures <= runs[when], (when, sorted(figures - runs[when]), text)
    assert checked >= 10  # the three runs of each allreduce row were read
