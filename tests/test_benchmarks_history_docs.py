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


#: a figure in a cell: ``1.16``, ``−16`` (as ``-16``), ``7.0`` of ``7.0×``; not the 16 of
#: ``float16``
FIGURE = re.compile(r"(?<![\w.])[-−]?\d+(?:\.\d+)?(?![\w.])")
#: a range as the page writes one: ``1.16–1.47``, ``−31 to −16``, ``6.5–9.1×`` (the unit
#: read too, or the range after it, ``/ 4.1–5.4×``, is never read)
RANGE = r"([-−]?\d+(?:\.\d+)?)(?:–| to )([-−]?\d+(?:\.\d+)?)(?:×| ?%)?"
#: the history's table of the Xeon 167's runs: a row is ``| MM-DD HH:MM | ... |``
RUN_ROW = re.compile(r"^\| (\d\d-\d\d \d\d:\d\d) \|(.*)$", re.M)


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def _xeon_167_table() -> dict[str, list[list[float]]]:
    """The history's run-by-run table of the Xeon 167: each column's header (without an
    ``(apart)`` note) to each run's figures in it, in order (``0.999 / 1.010``: two)."""
    history = (DOCS / "benchmarks-history.md").read_text(encoding="utf-8")
    start = history.index("## Issue 10 on the Xeon 167, run by run")
    section = history[start : history.index("\n## ", start)]  # not the next machine's table
    header = next(line for line in section.splitlines() if line.startswith("| run |"))
    names = [name.strip().removesuffix(" (apart)") for name in header.strip("|").split("|")]
    rows = [cells.strip().strip("|").split("|") for _, cells in RUN_ROW.findall(section)]
    assert len(rows) >= 8, "the history's rows of the Xeon 167's runs were not found"
    columns = {}
    for i, name in enumerate(names[1:]):
        columns[name] = [[_number(f) for f in FIGURE.findall(row[i])] for row in rows]
    return columns


@pytest.mark.timeout(30)
def test_the_xeon_167_ranges_are_those_of_its_run_by_run_table():
    """The allreduce rows gave four of the Xeon 167's nine runs one by one, and "in none of the
    four" when the history had nine: they give ranges over its run-by-run table now, each
    named by the table's column (``paired 1.16–1.47``), and each must be that column's lowest
    and highest figure (the ranges before the first dated run in the cell)."""
    columns = _xeon_167_table()
    checked = 0
    for row in _allreduce_rows():
        latest = STAMP.split(row.split(" | ")[1])[0]  # the ranges, before a run's own figures
        # the longest names first, each match then blanked: ``paired`` is in another's name
        for name, runs in sorted(columns.items(), key=lambda column: -len(column[0])):
            pattern = rf"{re.escape(name)} {RANGE}(?: / {RANGE})?"
            for found in re.finditer(pattern, latest):
                bounds = [_number(b) for b in found.groups() if b is not None]
                for series, (low, high) in enumerate(zip(bounds[::2], bounds[1::2])):
                    values = [run[series] for run in runs]
                    assert (low, high) == (min(values), max(values)), (name, series, values)
                    checked += 1
            latest = re.sub(pattern, "", latest)
            single = re.search(rf"{re.escape(name)} ([\d.]+) in every one", latest)
            if single:
                assert {run[0] for run in runs} == {_number(single.group(1))}, name
                checked += 1
    assert checked >= 16  # every column the rows name, the two of a pair counted apart
