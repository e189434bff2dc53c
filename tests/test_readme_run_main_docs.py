"""The classes the README names for the errors ``dist.run_main`` ends a script on in one line
are the classes the script's line names: it gave ``script.py: error: DataError: ...`` for a
feed the network does not read, where a feed the network lacks is a ``NetworkError``, integer
images a ``LayerError``, and a feed it does not read trains on without a word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_run_main_user_errors import run_script

pytestmark = pytest.mark.timeout(60)

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_class(what: str) -> str:
    """The class the README's run_main paragraph gives for ``what``."""
    text = " ".join(README.read_text().split())
    found = re.search(re.escape(what) + r"[^`]*?`(?:script\.py: error: )?(\w+Error): \.\.\.`", text)
    assert found is not None, f"README names no class for {what!r}"
    return found.group(1)


@pytest.mark.parametrize(
    "case, what",
    [
        ("nan", "a NaN pixel"),
        ("empty", "an empty set"),
        ("label", "a label past the classes"),
        ("feed", "a feed the network lacks"),
    ],
)
def test_each_error_ends_the_script_naming_the_class_the_readme_gives(case, what):
    done = run_script(case)
    assert done.returncode == 1, done.stderr[-2000:]
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"user_data_script.py: error: {_readme_class(what)}: "), line
