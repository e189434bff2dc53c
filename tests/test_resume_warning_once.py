"""``resume="auto"`` or ``"overwrite"`` without an output directory is warned of once per
Trainer, not at every ``fit``."""

from __future__ import annotations

import logging

from distconv import Trainer
from distconv.optim import SGD
from distconv.sync.local import LocalSync
from tests.test_researcher_sync import _model

SAID = "without an output directory (out_dir, --out) saves nothing"


def test_each_fit_of_one_trainer_without_out_warns_once(caplog):
    """A loop of fits (a schedule's stages, a notebook's reruns) repeated the warning at each;
    a first fit that asked for no resume does not use up the once."""
    net, data = _model()
    trainer = Trainer(net, LocalSync(SGD(0.1)), batch_size=4, accuracy=None)
    with caplog.at_level(logging.WARNING, logger="distconv.resume"):
        for epochs, resume in enumerate((False, "auto", "overwrite", "auto"), start=1):
            trainer.fit(data, epochs=epochs, resume=resume)
    assert sum(SAID in r.getMessage() for r in caplog.records) == 1, caplog.text
