"""A Trainer's ``config`` is saved in each checkpoint (its ``extra``) as the job check writes
it (:func:`~distconv.plain_json.plain`), and a resume compares it so, live against saved:
a set in it ended the run at its first checkpoint with a bare ``TypeError: Object of type set
is not JSON serializable``, a numpy number or a tuple as a key too, and a tuple (saved as a
list) or an int key (saved as text) refused every resume as "a different run"."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError, load_checkpoint
from distconv.optim import SGD, create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.test_run_scheme import DATA, _small_net

pytestmark = pytest.mark.timeout(60)


def _fit(out, config, epochs: int) -> Trainer:
    sync = LocalSync(create_optimizer("sgd", lr=0.05))
    trainer = Trainer(_small_net(), sync, 8, out_dir=out, progress=False, config=config)
    trainer.fit(DATA, epochs=epochs, resume="auto")
    return trainer


def test_a_set_a_tuple_and_a_numpy_number_in_the_config_are_saved_and_resumed(tmp_path):
    out = tmp_path / "run"
    model = {"frozen": {"conv2", "conv1"}, "channels": (2, 3), "width": np.int64(8), 4: "fc"}
    model["grid"] = {(0, 1): "corner"}
    trainer = _fit(out, {"model": model, "lr0": np.float32(0.5)}, 1)
    extra = load_checkpoint(trainer.checkpoints.run.latest().part("chief")).extra
    assert extra["model"] == {
        **{"frozen": ["conv1", "conv2"], "channels": [2, 3], "width": 8, "4": "fc"},
        "grid": {"[0, 1]": "corner"},
    }
    assert extra["lr0"] == 0.5
    (record,) = _fit(out, {"model": dict(model), "lr0": np.float32(0.5)}, 2).history
    assert record["epoch"] == 2  # resumed: the live set, tuple and keys equal to their saved
    other = {**model, "frozen": {"conv1", "fc"}}  # compared still: another set is another run
    with pytest.raises(CheckpointError, match=r"model\.frozen: checkpoint \['conv1', 'conv2'\]"):
        _fit(out, {"model": other, "lr0": np.float32(0.5)}, 3)


def test_a_config_no_checkpoint_can_hold_is_refused_at_the_start_naming_its_key(tmp_path):
    """A value that holds itself has no JSON form, even the job check's: refused by the
    Trainer, not at the end of epoch 1 with a bare ValueError that names no key."""
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match=r"config 'grid' cannot be saved.*[Cc]ircular"):
        Trainer(_small_net(), LocalSync(create_optimizer("sgd")), 8, out_dir=tmp_path,
                config={"grid": loop})  # fmt: skip


class _TaggedSGD(SGD):
    """An optimizer of one's own whose config holds what JSON has no form for."""

    def config(self) -> dict:
        return {**super().config(), "groups": {"fc", "conv"}, "beta": np.float32(0.5)}


def test_an_optimizer_config_json_cannot_write_is_saved_as_the_config_is_and_resumed(tmp_path):
    """The optimizer's config was written with ``json.dumps``: a custom ``config()`` holding a
    set or a numpy number ended the run at its first checkpoint."""
    out = tmp_path / "run"
    for epochs in (1, 2):
        sync = LocalSync(_TaggedSGD(lr=0.05))
        trainer = Trainer(_small_net(), sync, 8, out_dir=out, progress=False)
        (record,) = trainer.fit(DATA, epochs=epochs, resume="auto")
        assert record["epoch"] == epochs  # the second resumed: its live config equals the saved
    optimizer = load_checkpoint(trainer.checkpoints.run.latest().part("chief")).optimizer
    assert optimizer == {"name": "sgd", "lr": 0.05, "weight_decay": 0.0, "groups": ["conv", "fc"],
                         "beta": 0.5}  # fmt: skip
