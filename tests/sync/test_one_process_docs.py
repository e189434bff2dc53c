"""Where the docs say a strategy of several ranks that leaves a collective to ``SyncStrategy`` is
refused is where the code refuses it: ``Trainer(...)`` itself, before its ``setup`` or any
collective runs, even for a strategy whose own ``setup`` skips the base's. The docs said "at
setup", and "by the default itself" for such a strategy, after the Trainer's own refusal came."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]


class _OwnSetup(LocalSync):
    """Rank 0 of 2 that leaves every collective to the base, its setup skipping the base's."""

    def __init__(self) -> None:
        super().__init__(create_optimizer("sgd", lr=0.1))
        self.world_size = 2
        self.setups = 0

    def setup(self, params, config=None, state=None) -> None:
        self.setups += 1


def _said(path: str, pattern: str) -> str:
    text = " ".join((ROOT / path).read_text().split())
    found = re.search(pattern, text)
    assert found is not None, f"{path}: no {pattern!r}"
    return found.group(0)


def test_the_trainer_refuses_it_where_it_is_given_and_the_docs_say_so():
    sync = _OwnSetup()
    with pytest.raises(TypeError, match="leaves broadcast_parameters, allreduce_sum"):
        Trainer(lenet((1, 8, 8), num_classes=3), sync, 4)
    assert sync.setups == 0
    sentence = r"so a strategy of several ranks whose class .*?one_process\.py`\)"
    contract = _said("docs/architecture.md", sentence)
    assert "by `Trainer(...)` where it is given" in contract, contract
    readme = _said("README.md", r"a strategy of several ranks that leaves a collective .*?\.")
    assert "where the `Trainer` is given it" in readme, readme
