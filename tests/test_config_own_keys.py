"""A ``Trainer(config=...)`` key that a checkpoint keeps something of its own under
(``scheme``, ``earlier_schemes``, ``step_in_epoch``, ``sums``, ``train_data``) was silently
overwritten in each checkpoint's ``extra``: kept beside it, as ``config
<key>``. A key the Trainer keeps its own fact under, with another value, is refused."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import load_checkpoint
from distconv.checkpoint_checks import OWN_KEYS
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.resume import Position, StepCheckpoints
from distconv.run_dir import RunDirectory
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.test_run_scheme import DATA, _small_net

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("key", sorted(OWN_KEYS))
def test_a_config_key_a_checkpoint_keeps_its_own_under_is_kept_beside_it(tmp_path, key):
    """Refused at first, where a script's ``--scheme`` flag in ``vars(args)`` had run:
    kept as ``config <key>`` in each checkpoint, and under its own name in the
    job check; the checkpoint's own fact keeps its key, which a resume reads."""
    out, config = tmp_path / "run", {key: "cosine", "data": "digits"}
    for epochs in (1, 2):  # the second resumes: the checkpoint's own facts read back
        sync = LocalSync(create_optimizer("sgd"))
        trainer = Trainer(_small_net(), sync, 8, out_dir=out, progress=False, config=config)
        (record,) = trainer.fit(DATA, epochs=epochs, resume="auto")
        assert record["epoch"] == epochs and trainer.config[key] == "cosine"
    extra = load_checkpoint(trainer.checkpoints.run.latest().part("chief")).extra
    assert extra[f"config {key}"] == "cosine" and extra["scheme"] == {"sync": "local"}
    assert extra["train_data"]["examples"] == 16 and extra["step_in_epoch"] == 0


def test_a_config_key_beside_one_a_checkpoint_keeps_is_kept_too(tmp_path):
    sync = LocalSync(create_optimizer("sgd"))
    config = {"sums": 1, "config sums": 2}
    trainer = Trainer(_small_net(), sync, 8, out_dir=tmp_path, progress=False, config=config)
    trainer.fit(DATA, epochs=1)
    extra = load_checkpoint(trainer.checkpoints.run.latest().part("chief")).extra
    assert (extra["config config sums"], extra["config sums"]) == (1, 2)
    assert extra["sums"] == {}  # the epoch's end's own: none to go on from


def test_every_key_a_checkpoint_writes_beside_the_config_is_one_of_its_own(tmp_path):
    """What a checkpoint writes beside the run's facts, an epoch resumed under another scheme's
    earlier ones included: a key added there and not to OWN_KEYS is overwritten unrefused."""
    params = [Parameter("w", np.ones(3))]
    sync = LocalSync(create_optimizer("sgd"))
    sync.setup(params)
    ckpts = StepCheckpoints(RunDirectory(tmp_path, keep=1), params, sync, {"seed": 0})
    ckpts.open(False)
    earlier = [{"scheme": {"sync": "mpi"}, "to_step": 3}]  # steps 3 of 2 to 5: another scheme
    ckpts.save(Position(0, 4, 2, {}, earlier), {"loss": 1.0})
    extra = load_checkpoint(ckpts.run.latest().part("chief")).extra
    ckpts.close()
    assert "earlier_schemes" in extra  # the save wrote each of its keys
    assert set(extra) <= set(OWN_KEYS), sorted(set(extra) - set(OWN_KEYS))


def test_a_config_key_the_trainer_keeps_its_own_under_is_refused_where_it_differs():
    """The Trainer's own facts (batch size, seed, dtype, ...) replaced a config key of their
    name: ``config={"dtype": "float16"}`` in a float32 run was lost from the job check and each
    checkpoint without a word. The same value (a script's ``vars(args)``) is taken."""
    sync = LocalSync(create_optimizer("sgd"))
    with pytest.raises(ValueError, match=r"config key 'dtype' .*'float16'.*'float32'.*rename"):
        Trainer(_small_net(), sync, 8, config={"dtype": "float16"})
    same = {"batch_size": np.int64(8), "seed": 0, "lr_decay": 1, "dtype": "float32", "lr": 0.1}
    trainer = Trainer(_small_net(), sync, 8, config=same)
    assert trainer.config["lr"] == 0.1 and trainer.config["lr_decay"] == 1.0


_LOOP: dict = {}
_LOOP["self"] = _LOOP  # a config no checkpoint can hold


@pytest.mark.parametrize("config", [{"dtype": "float32"}, {"grid": _LOOP}])
def test_a_refused_config_leaves_the_network_uncast(config):
    """The weights were cast to ``dtype`` before the config was refused: the network of a
    refused ``Trainer(dtype="float64", config={"dtype": "float32"})`` was float64, and the
    same Trainer without ``dtype=`` was then refused as keeping float64. So was
    one with a config no checkpoint can hold."""
    net, sync = _small_net(), LocalSync(create_optimizer("sgd"))
    with pytest.raises(ValueError, match="config (key )?'"):
        Trainer(net, sync, 8, dtype="float64", config=config)
    assert {str(p.value.dtype) for p in net.parameters()} == {"float32"}
    Trainer(net, sync, 8, config={"dtype": "float32"})  # the retry without dtype= is taken


def test_a_config_key_of_the_trainers_own_that_is_none_is_taken_as_not_said():
    """A script's ``--dtype`` flag left to None, passed as ``Trainer(dtype=args.dtype,
    config=vars(args))``, says what ``dtype=None`` says, the network's own: the refusal of a
    value that differs from the Trainer's refused it (float32 is no None). The
    Trainer's fact goes in its place, as before."""
    sync = LocalSync(create_optimizer("sgd"))
    said = {"dtype": None, "seed": None, "checkpoint_every": None, "layers": 3}
    trainer = Trainer(_small_net(), sync, 8, dtype=said["dtype"], config=said)
    assert (trainer.config["dtype"], trainer.config["seed"]) == ("float32", 0)


@pytest.mark.parametrize("said", ["f8", "double", float])
def test_a_config_dtype_said_in_another_of_numpys_names_is_the_trainers_own(said):
    """``Trainer(dtype=args.dtype, config=vars(args))`` of a ``--dtype f8`` (or ``double``,
    or Python's ``float``), a name ``dtype=`` takes, was refused as another dtype than the
    Trainer's ``float64``, its own argument's; ``float16`` is still refused."""
    sync = LocalSync(create_optimizer("sgd"))
    trainer = Trainer(_small_net(), sync, 8, dtype=said, config={"dtype": said})
    assert trainer.config["dtype"] == "float64"
    with pytest.raises(ValueError, match=r"config key 'dtype' is 'f2'.*'float64'"):
        Trainer(_small_net(), sync, 8, dtype=said, config={"dtype": "f2"})
