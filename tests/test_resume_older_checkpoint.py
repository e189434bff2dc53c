"""A checkpoint of an older distconv records fewer facts (no network layers, world size or
sync scheme before the facts form that records them; no training-set fingerprint before
that), and a resume does not compare those: a model changed from tanh to relu since such a
checkpoint resumed without a word. The chief now says once which facts were not
compared. Each older checkpoint here is one this distconv wrote, its ``extra`` rewritten to the
older layout as that distconv wrote it (checked against runs of those commits: facts_form
absent and no ``scheme`` before 12-06, facts_form 1 without ``layers`` and ``world_size``)."""

from __future__ import annotations

import logging

import pytest

from distconv.checkpoint import CheckpointError, load_checkpoint
from distconv.resume_facts import FACTS_FORM_KEY, FACTS_FORMS
from tests.test_resume_checks import _rewrite_extra
from tests.test_resume_model_structure import DATA, _net, _trainer

pytestmark = pytest.mark.timeout(60)

#: what the warning says, up to the facts it names
SAID = "was written by an older distconv: it records no "
#: an ``extra`` as each older form wrote it: the facts it lacks (None: not written)
BEFORE_SCHEMES = {FACTS_FORM_KEY: None, "scheme": None, "layers": None, "world_size": None}
FORM_1 = {FACTS_FORM_KEY: FACTS_FORMS[0], "layers": None, "world_size": None}
#: a scheme under which a resume compares the world size: an asynchronous one's
ASYNC = {"sync": "pserver", "mode": "async", "max_staleness": 4}


def _resumed(out, caplog, epochs: int, act: str = "relu") -> list[str]:
    """Resume ``out`` with ``act`` for ``epochs``; the warnings of facts not compared."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="distconv.resume"):
        records = _trainer(out, _net(act)).fit(DATA, epochs=epochs, resume=True)
    assert [r["epoch"] for r in records] == [epochs]  # resumed, not refused
    said = [r.getMessage() for r in caplog.records]
    return [m for m in said if "are not compared with this run" in m]


@pytest.mark.parametrize(
    ("older", "names"),
    [
        (BEFORE_SCHEMES, "layers, world size, sync scheme"),
        (FORM_1, "layers"),
        ({**FORM_1, "scheme": ASYNC}, "layers, world size"),
        (
            {**BEFORE_SCHEMES, "train_data": None},
            "training set's fingerprint, layers, world size, sync scheme",
        ),
    ],
)
def test_the_facts_an_older_checkpoint_lacks_are_said_once_at_its_resume(
    tmp_path, caplog, older, names
):
    """Resumed with another activation, which this distconv refuses on its own checkpoint:
    the resume goes on, and says once which facts it did not compare, naming the checkpoint.
    The checkpoint that resume writes is of this form, and its resume says nothing."""
    out = tmp_path / "run"
    first = _trainer(out)
    first.fit(DATA, epochs=1)
    _rewrite_extra(first.checkpoints.run.latest(), **older)
    path = first.checkpoints.run.latest().part("chief")
    (line,) = _resumed(out, caplog, 2)
    assert line == (
        f"checkpoint {path} {SAID}{names}; these are not compared with this run's, so a change "
        "in them since the checkpoint resumes without a refusal or a warning"
    )
    assert _resumed(out, caplog, 3) == []


def test_a_facts_form_this_distconv_does_not_know_is_said_to_be_another_distconvs(tmp_path, caplog):
    """A checkpoint of a later distconv (a rollback) records a form this one does not know: it
    is no older one's, and the facts it records under that form are not read here. It does
    record them: it was said to record none."""
    out = tmp_path / "run"
    first = _trainer(out)
    first.fit(DATA, epochs=1)
    later = "distconv: numbers with their types; the network's layers and more"
    _rewrite_extra(first.checkpoints.run.latest(), **{FACTS_FORM_KEY: later})
    assert "layers" in load_checkpoint(first.checkpoints.run.latest().part("chief")).extra
    (line,) = _resumed(out, caplog, 2, act="tanh")
    assert f"was written by another distconv (facts form {later!r}, unknown here)" in line
    assert line.endswith("this distconv does not read its layers; these are not compared with this "
                         "run's, so a change in them since the checkpoint resumes without a "
                         "refusal or a warning")  # fmt: skip


def test_a_checkpoint_of_the_form_with_layers_and_no_world_size_compares_its_layers(
    tmp_path, caplog
):
    """For seven minutes of 12-06 a distconv recorded the layers and not yet the world size,
    under a form of its own; the next one's form replaced it in the list of forms, so its
    checkpoints read as older than the first form: the layers they record were not compared,
    and another activation resumed."""
    out = tmp_path / "run"
    first = _trainer(out)
    first.fit(DATA, epochs=1)
    form = "distconv: numbers with their types; the network's layers"
    _rewrite_extra(first.checkpoints.run.latest(), **{FACTS_FORM_KEY: form, "world_size": None})
    said = r"\(layers\.mix\.act: checkpoint 'Tanh', this run 'ReLU'\)"
    with pytest.raises(CheckpointError, match=said):
        _trainer(out, _net("relu")).fit(DATA, epochs=2, resume=True)
    assert _resumed(out, caplog, 2, act="tanh") == []  # its local scheme: no world compared


def test_the_world_size_is_said_only_where_a_resume_would_compare_it(tmp_path, caplog):
    """A resume compares the world size only where the checkpoint's scheme is asynchronous
    (a synchronous one makes one update a step on any number of workers, and a checkpoint
    of this distconv resumed on another number says nothing): a checkpoint that lacks it
    under a synchronous scheme lost no check, and was said to have, on every resume."""
    out = tmp_path / "run"
    first = _trainer(out)
    first.fit(DATA, epochs=1)
    form = "distconv: numbers with their types; the network's layers"
    _rewrite_extra(first.checkpoints.run.latest(), **{FACTS_FORM_KEY: form, "world_size": None})
    assert _resumed(out, caplog, 2, act="tanh") == []
    _rewrite_extra(
        first.checkpoints.run.latest(),
        **{FACTS_FORM_KEY: form, "world_size": None, "scheme": ASYNC},
    )
    (line,) = _resumed(out, caplog, 3, act="tanh")
    assert f"{SAID}world size; these are not compared" in line
