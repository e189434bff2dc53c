"""A checkpoint an older distconv wrote, whose ``data`` or ``model`` fact held a number no Real
(a Decimal, a complex) by its text alone, or whose ``lr_decay`` was a Fraction's text
(``"9/10"``), resumes: the job check now writes such a number with its type (``{"class":
"Decimal", "text": "0.1"}``), and a resume compared it with the text."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction

import pytest

from distconv import plain_json
from distconv.checkpoint import CheckpointError
from distconv.data import split, synthetic
from distconv.resume_facts import FACTS_FORM, FACTS_FORM_KEY, check_same_run
from tests.test_resume_checks import _rewrite_extra, _trainer


def test_a_checkpoint_holding_numbers_by_their_text_alone_resumes(tmp_path):
    train, test = split(synthetic(n=64, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
    data = {"name": "digits", "noise": Decimal("0.1"), Decimal("0.5"): 1j, "0.5": 2}
    data[Fraction(1, 4)] = Fraction(1, 3)
    config, decay = {"data": data, "model": "lenet"}, Fraction(9, 10)
    first = _trainer(tmp_path, config=config, lr_decay=decay)
    first.fit(train, test, epochs=1)
    older = {"name": "digits", "noise": "0.1", "0.5 (Decimal)": "1j", "0.5": 2, "1/4": "1/3"}
    # as older versions wrote them: the Decimal and the complex, and later the Fractions
    _rewrite_extra(  # no facts_form: an older distconv did not write one
        first.checkpoints.run.latest(), data=older, lr_decay="9/10", facts_form=None
    )
    with pytest.raises(CheckpointError, match=r"'noise': '0.1'.*this run .*'text': '0.2'"):
        _trainer(tmp_path, config={"data": {**data, "noise": Decimal("0.2")}}).fit(
            train, test, epochs=2, resume=True
        )
    with pytest.raises(CheckpointError, match=r"lr_decay: checkpoint '9/10', this run .*4/5"):
        _trainer(tmp_path, config=config, lr_decay=Fraction(4, 5)).fit(
            train, test, epochs=2, resume=True
        )
    again = _trainer(tmp_path, config=config, lr_decay=decay)
    assert [r["epoch"] for r in again.fit(train, test, epochs=2, resume=True)] == [2]


def _saved(value):
    """``value`` as a checkpoint's facts keep it (its JSON form)."""
    return json.loads(plain_json.dumps(value))


def test_a_checkpoint_of_this_distconv_holding_the_text_never_agrees_with_the_number():
    """A checkpoint that records its facts' form was written with numbers typed: its string
    ``"0.1"`` (or ``"9/10"``) was a string, and a run that now holds ``Decimal("0.1")`` (or
    ``Fraction(9, 10)``) is another run. Compared by text too, as an older checkpoint is, it
    resumed. Without the marker (an older checkpoint) the text still resumes."""
    for text, number in (("0.1", Decimal("0.1")), ("9/10", Fraction(9, 10))):
        ours = {"data": _saved({"eps": number})}
        theirs = {"data": _saved({"eps": text})}
        check_same_run("older", theirs, ours)
        # an older checkpoint whose config had a key of the marker's name is still older
        check_same_run("older, its config's own facts_form", {**theirs, FACTS_FORM_KEY: 2}, ours)
        with pytest.raises(CheckpointError, match=r"data.eps: checkpoint '"):
            check_same_run("now", {**theirs, FACTS_FORM_KEY: FACTS_FORM}, ours)
        check_same_run("now", {"data": ours["data"], FACTS_FORM_KEY: FACTS_FORM}, ours)


def test_a_run_of_this_distconv_whose_config_held_the_text_is_not_resumed_with_the_number(
    tmp_path,
):
    """The marker is written with each checkpoint: a run whose data fact held ``"0.1"`` is
    refused by one that holds ``Decimal("0.1")``, and resumed by one that holds ``"0.1"``."""
    train, test = split(synthetic(n=64, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
    _trainer(tmp_path, config={"data": {"eps": "0.1"}}).fit(train, test, epochs=1)
    with pytest.raises(CheckpointError, match=r"data.eps: checkpoint '0.1'"):
        _trainer(tmp_path, config={"data": {"eps": Decimal("0.1")}}).fit(
            train, test, epochs=2, resume=True
        )
    again = _trainer(tmp_path, config={"data": {"eps": "0.1"}})
    assert [r["epoch"] for r in again.fit(train, test, epochs=2, resume=True)] == [2]
