"""The Trainer's settings that its run's config and checkpoints record are read-only once it
is made: one changed between two fits trained with the new value while its checkpoints said
the old one, and a later resume of that run was refused as another run's."""

from __future__ import annotations

import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from distconv.trainer_settings import TrainerSettings
from tests.mpi.common import small_lenet, trainer_data

FIXED = {
    "batch_size": 16,
    "accumulate": 2,
    "seed": 5,
    "lr_decay": 0.5,
    "dtype": "float32",
    "checkpoint_every": 3,
    "out_dir": "elsewhere",
}


def _trainer(**kw):
    sync = LocalSync(create_optimizer("sgd", lr=0.05))
    return Trainer(small_lenet(seed=3), sync, 8, progress=False, **kw)


@pytest.mark.parametrize("name", sorted(FIXED))
def test_a_setting_assigned_after_the_trainer_is_made_is_refused_with_the_way_on(name):
    t = _trainer()
    before = getattr(t, name)
    with pytest.raises(AttributeError) as refused:
        setattr(t, name, FIXED[name])
    assert str(refused.value) == (
        f"Trainer.{name} is fixed once the Trainer is made: its run's config and checkpoints "
        "record it (a resume compares them), and a changed one trained with the new value "
        f"while they said the old; make a new Trainer(network, sync, ..., {name}=...) on the "
        "same network and sync instead (it goes on from their trained weights and optimizer "
        "state)"
    )
    assert getattr(t, name) == before


def test_every_setting_the_run_config_records_is_fixed():
    config_keys = set(_trainer().config) - {"global_batch"}  # computed from the others
    assert config_keys <= set(vars(TrainerSettings))


def test_a_batch_size_refused_between_fits_leaves_the_run_as_its_checkpoints_say(tmp_path):
    t = _trainer(out_dir=tmp_path / "run")
    t.fit(trainer_data(), epochs=1)
    with pytest.raises(AttributeError, match="batch_size is fixed"):
        t.batch_size = 16
    t.fit(trainer_data(), epochs=2, resume=True)
    assert t.global_batch == t.config["global_batch"] == 8
    again = _trainer(out_dir=tmp_path / "run")  # the run resumes as the one it is
    again.fit(trainer_data(), epochs=2, resume=True)


def test_a_subclass_setting_one_before_super_init_is_told_to_pass_it_there():
    """Set first by a subclass, then by Trainer.__init__ from its argument: not 'fixed once
    made' (nothing was made yet), but where to give it; one set after super().__init__() is
    refused as any later assignment is (the config recorded the argument's)."""

    class SeededFirst(Trainer):
        def __init__(self, *args, **kwargs):
            self.seed = 5
            super().__init__(*args, **kwargs)

    class SeededAfter(Trainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.seed = 5

    sync = LocalSync(create_optimizer("sgd", lr=0.05))
    with pytest.raises(AttributeError) as refused:
        SeededFirst(small_lenet(seed=3), sync, 8, progress=False)
    assert str(refused.value) == (
        "SeededFirst.seed was set before Trainer.__init__ set it from its argument (by a "
        "subclass's __init__, before super().__init__()?): pass seed=... to "
        "super().__init__() instead, which records it in the run's config and checkpoints"
    )
    with pytest.raises(AttributeError, match=r"^SeededAfter\.seed is fixed once the Seeded"):
        SeededAfter(small_lenet(seed=3), sync, 8, progress=False)
