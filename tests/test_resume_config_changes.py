"""A script's own ``config`` entries are written into each checkpoint and never compared: a
resume whose entry changed (a ``--act`` flag the model reads, under ``config=vars(args)``)
went on without a word. The chief warns, in one line naming each entry that changed, and the
run trains on: a ``vars(args)`` whose harmless flags change must not be refused."""

from __future__ import annotations

import argparse
import logging

import numpy as np
import pytest

from distconv.script_flags import add_run_flags
from tests.test_resume_model_structure import DATA, _trainer, _weights

pytestmark = pytest.mark.timeout(60)

CHANGED = "resuming with config entries other than the checkpoint's"


def _resume(out, caplog, config: dict, epochs: int, **kw) -> tuple[list[str], dict]:
    """Resume the run in ``out`` with ``config`` up to ``epochs``; the config warnings said,
    and the weights trained."""
    trainer = _trainer(out, config=config, **kw)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="distconv.resume"):
        (record,) = trainer.fit(DATA, epochs=epochs, resume=True)
    assert record["epoch"] == epochs  # trained on
    said = [r.getMessage() for r in caplog.records if CHANGED in r.getMessage()]
    return said, _weights(trainer)


def test_a_changed_config_entry_is_warned_of_by_name_and_the_run_trains_on(tmp_path, caplog):
    out = tmp_path / "run"
    config = {"act": "tanh", "width": 8, "note": "x", "clip": float("nan"), "epochs": 1}
    first = _trainer(out, config=config)
    first.fit(DATA, epochs=1)
    before = _weights(first)
    # epochs, the batch split and a NaN that stayed NaN are no change; a flag added since is
    # none either (the checkpoint has no value to compare)
    same = {**config, "epochs": 2, "added": 1}
    assert _resume(out, caplog, same, 2, checkpoint_every=3)[0] == []
    changed = {**config, "act": "relu", "width": 16, "epochs": 3}
    (said,), after = _resume(out, caplog, changed, 3)
    assert "act: checkpoint 'tanh', this run 'relu'; width: checkpoint 8, this run 16" in said
    assert "note" not in said and "clip" not in said and "epochs" not in said, said
    assert all(not np.array_equal(before[k], v) for k, v in after.items())  # trained on


def test_a_config_of_the_scripts_own_run_flags_resumes_without_a_warning(tmp_path, caplog):
    """``config=vars(args)`` of a script taking the examples' flags (add_run_flags): its
    ``resume`` is False on the first run and True on the resume, so every resume warned of a
    changed config entry that changes nothing the run trains; ``--resume auto`` too."""
    parser = argparse.ArgumentParser()
    add_run_flags(parser, epochs=1, batch_size=16)
    out = str(tmp_path / "run")
    first = parser.parse_args(["--out", out])
    _trainer(out, config=vars(first)).fit(DATA, epochs=first.epochs, resume=first.resume)
    for epochs, resume in ((2, ["--resume"]), (3, ["--resume", "auto"])):
        args = parser.parse_args(["--out", out, "--epochs", str(epochs), *resume])
        assert _resume(out, caplog, vars(args), epochs)[0] == []


def test_a_nan_beside_a_changed_setting_is_not_named_as_changed(tmp_path, caplog):
    """An entry that is a mapping with a NaN in it (``{"clip": nan, "act": ...}``) and one other
    key changed: the warning named the NaN too (``opts.clip: checkpoint nan, this run nan``),
    a value that did not change."""
    out = tmp_path / "run"
    _trainer(out, config={"opts": {"clip": float("nan"), "act": "tanh"}}).fit(DATA, epochs=1)
    changed = {"opts": {"clip": float("nan"), "act": "relu"}}
    (said,), _ = _resume(out, caplog, changed, 2)
    assert "(opts.act: checkpoint 'tanh', this run 'relu')" in said, said
