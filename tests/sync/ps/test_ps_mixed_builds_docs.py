"""docs/operations.md's "Upgrading distconv" said a job of mixed versions fails "naming a stuck
rank rather than the versions"; its workers warn at setup naming both builds, and the job goes
on. The paragraph now quotes that warning: the words a real worker logs beside a real shard run
from an edited copy of the source match it."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from tests.sync.ps.test_ps_releases import set_up, started, warned

pytestmark = pytest.mark.timeout(60)

OPERATIONS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def _upgrade_paragraph() -> str:
    """The paragraph on mixed versions, its line breaks read as spaces."""
    text = OPERATIONS.read_text()
    start = text.index("Stop the whole job to upgrade")
    return " ".join(text[start : text.index("\n\n", start)].split())


def _as_pattern(quoted: str) -> re.Pattern[str]:
    """The docs' quote of a line as a pattern: its ``...`` and ``HOST:PORT`` stand for any
    text."""
    pattern = re.escape(quoted).replace(r"\.\.\.", ".+").replace("HOST:PORT", "[^)]+")
    return re.compile(pattern)


def test_the_upgrade_paragraph_quotes_the_warning_a_mixed_job_logs(shards, tmp_path, caplog):
    paragraph = _upgrade_paragraph()
    assert "stuck rank" not in paragraph, paragraph
    quoted = re.search(r"`(pserver shards run another distconv than[^`]*)`", paragraph)
    assert quoted is not None, paragraph
    caplog.set_level(logging.WARNING, logger="distconv.sync.ps")
    optim = ("one update rule each", "one update rule each (edited)")
    set_up(started(shards, tmp_path, distconv__optim=optim))
    [said] = warned(caplog)
    assert _as_pattern(quoted[1]).fullmatch(said), (quoted[1], said)
