"""docs/operations.md says where shard-only settings apply.

It described ``--on-worker-loss continue`` as if an operator of ``distconv-launch local`` could
set it; that is a ``distconv pserver`` option, which the launcher does not pass on.
``--max-staleness`` was one too, till ``distconv-launch local`` took it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARD_ONLY = ("--on-worker-loss",)


def _options(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _local_parser():
    from launcher.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.choices and "local" in a.choices)
    return sub.choices["local"]


@pytest.mark.timeout(60)
def test_shard_only_settings_are_documented_as_distconv_pserver_options():
    from distconv.cli import build_parser

    pserver = build_parser()._subparsers._group_actions[0].choices["pserver"]
    for flag in SHARD_ONLY:
        assert flag in _options(pserver) and flag not in _options(_local_parser()), flag
    text = (REPO_ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    for paragraph in re.split(r"\n\s*\n", text):
        for flag in SHARD_ONLY:
            if f"`{flag}" in paragraph:
                assert "distconv pserver" in paragraph, paragraph  # not a launcher flag
