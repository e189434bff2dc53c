"""Every test file the user docs name as evidence exists.

docs/protocol.md named ``test_stop_patience_silence_then_crossing.py`` as the proof of the stop's
patience after the file was merged into another and deleted: a reader looking for the proof
found nothing. A path (``tests/sync/ps/test_x.py``, or a helper's, ``tests/sync/ps/ps_helpers.py``)
must exist as written; a bare name (``test_x.py``, beside a path in the same sentence) must be
some file under ``tests/``; in backquotes or not.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: a file under tests/ by its path (a helper module too), or a test file's bare name, in
#: backquotes or in plain prose: a name outside backquotes sent the reader looking as well
NAMED = re.compile(r"(?<![\w/])(tests/[\w/]+\.py|(?:[\w/]*/)?test_\w+\.py)")


def _missing(text: str, names: set[str]) -> list[str]:
    """The test files ``text`` names that do not exist."""
    return [
        name
        for name in NAMED.findall(text)
        if not (
            (REPO_ROOT / name).is_file() if name.startswith("tests/") else Path(name).name in names
        )
    ]


def test_every_test_file_the_docs_name_exists():
    names = {p.name for p in (REPO_ROOT / "tests").rglob("test_*.py")}
    docs = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    missing = {d.name: m for d in docs if (m := _missing(d.read_text(), names))}
    assert not missing, missing


def test_a_deleted_test_file_is_caught():
    """The check finds a name no file has, with or without its path or its backquotes, a
    helper's path too; a name inside another (``my_test_x.py``) is no test file's."""
    names = {"test_here.py"}
    said = (
        "`tests/sync/test_gone.py`, `test_here.py`, `test_gone_too.py`; "
        "tests/sync/ps/gone_helpers.py and test_gone_in_prose.py, my_test_x.py, "
        "sync/test_here.py"
    )
    assert _missing(said, names) == [
        "tests/sync/test_gone.py",
        "test_gone_too.py",
        "tests/sync/ps/gone_helpers.py",
        "test_gone_in_prose.py",
    ]
