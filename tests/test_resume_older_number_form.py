"""A checkpoint an older distconv wrote, whose ``data`` or ``model`` fact held a number no Real
(a Decimal, a complex) by its text alone, resumes: the job check now writes such a number with
its type (``{"class": "Decimal", "text": "0.1"}``), and a resume compared it with the text."""

from __future__ import annotations

from decimal import Decimal

import pytest

from distconv.checkpoint import CheckpointError
from distconv.data import split, synthetic
from tests.test_resume_checks import _rewrite_extra, _trainer


def test_a_checkpoint_holding_a_decimal_by_its_text_alone_resumes(tmp_path):
    train, test = split(synthetic(n=64, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
    data = {"name": "digits", "noise": Decimal("0.1"), Decimal("0.5"): 1j, "0.5": 2}
    first = _trainer(tmp_path, config={"data": data, "model": "lenet"})
    first.fit(train, test, epochs=1)
    older = {"name": "digits", "noise": "0.1", "0.5 (Decimal)": "1j", "0.5": 2}
    _rewrite_extra(first.checkpoints.run.latest(), data=older)  # as before k616
    with pytest.raises(CheckpointError, match=r"'noise': '0.1'.*this run .*'text': '0.2'"):
        _trainer(tmp_path, config={"data": {**data, "noise": Decimal("0.2")}}).fit(
            train, test, epochs=2, resume=True
        )
    again = _trainer(tmp_path, config={"data": data, "model": "lenet"})
    assert [r["epoch"] for r in again.fit(train, test, epochs=2, resume=True)] == [2]
