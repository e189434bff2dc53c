"""docs/operations.md says how every command line reads a number.

The rule (``distconv.number_text``) was told nowhere an operator reads; the paragraph now gives
examples of what is taken and what is refused, and this holds them to the code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from distconv.number_text import number

OPERATIONS = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
TAKEN = {"12": int, "+12": int, "0.5": float, ".5": float, "5.": float, "1e-3": float}
REFUSED = {"1_0": int, "١": int, "nan": float, "inf": float}


def _paragraph() -> str:
    text = OPERATIONS.read_text(encoding="utf-8")
    return next(p for p in text.split("\n\n") if p.startswith("Every number on a command line"))


@pytest.mark.timeout(30)
def test_the_spellings_the_docs_take_are_taken_and_those_they_refuse_refused():
    paragraph = _paragraph()
    for text, kind in TAKEN.items():
        assert f"`{text}`" in paragraph, text
        assert number(text, kind) == kind(text)
    for text, kind in REFUSED.items():
        assert f"`{text}`" in paragraph, text
        with pytest.raises(argparse.ArgumentTypeError):
            number(text, kind)
        if kind is int:  # an integer spelling a decimal flag refuses too
            with pytest.raises(argparse.ArgumentTypeError):
                number(text, float)
