"""SyncStrategy's check that a subclass's ``__init__`` called the base's names the class whose
``__init__`` skipped it."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from distconv import Trainer
from distconv.optim import SGD
from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync
from tests.test_researcher_sync import Forgetful, PlainSGD, _model


class Careful(Forgetful):
    """Calls its parent's ``__init__``, as it should: the parent is the one that forgot."""

    def __init__(self, lr: float) -> None:
        super().__init__(lr)
        self.careful = True


def test_the_class_whose_init_skipped_the_base_s_is_named_not_its_subclass():
    """Making a Careful said "Careful.__init__ did not call super().__init__": Careful's does;
    Forgetful's, which it calls, does not."""
    with pytest.raises(
        TypeError, match=r"^Forgetful\.__init__ returned without calling super\(\)\.__init__"
    ):
        Careful(0.1)


class ReadsRankFirst(LocalSync):
    """Reads the rank the base sets before calling the base."""

    def __init__(self, lr: float) -> None:
        self.tag = f"rank{self.rank}"
        super().__init__(SGD(lr))


class ReadsConfigFirst(LocalSync):
    """Reads a setting its config lacks before calling the base, as a typo does."""

    def __init__(self, config: SimpleNamespace) -> None:
        self.lr = config.lrr
        super().__init__(SGD(config.lr))


def test_an_attribute_the_base_sets_read_before_it_is_the_skipped_base_and_no_other():
    """8ec8f633 gave strategies the layers' AttributeError path, untested for them: a base
    field read first is the skipped base call, named; a config's typo is the strategy's own."""
    with pytest.raises(TypeError, match=r"^ReadsRankFirst\.__init__ failed \(.*'rank'\) before"):
        ReadsRankFirst(0.1)
    with pytest.raises(AttributeError, match=r"has no attribute 'lrr'$"):
        ReadsConfigFirst(SimpleNamespace(lr=0.1))


@dataclasses.dataclass(eq=False)
class DataclassSGD(PlainSGD):
    """A dataclass strategy: its generated ``__init__`` never calls the base's, and is set
    after ``__init_subclass__`` wrapped the class's own, so the made-check never saw it."""

    lr: float = 0.1
    zero: bool = True


@dataclasses.dataclass(eq=False)
class PostInitSGD(DataclassSGD):
    """Calls the base in ``__post_init__``, where a dataclass makes it."""

    def __post_init__(self) -> None:
        SyncStrategy.__init__(self, SGD(lr=self.lr))  # super() reaches the dataclass __init__


_SKIPPED = r"^DataclassSGD was made without calling super\(\)\.__init__\(optimizer, rank"


def test_a_dataclass_strategy_that_skips_the_base_s_init_is_told_so_where_first_used():
    """The Trainer took it and failed with the bare "'DataclassSGD' object has no attribute
    'rank'" (setup by hand, "... 'optimizer'"), the far-away error the base-init check
    replaces; the message names the class and __post_init__. One calling the base there
    trains."""
    net, data = _model()
    with pytest.raises(TypeError, match=_SKIPPED + r".*a dataclass calls it in __post_init__"):
        Trainer(net, DataclassSGD(), batch_size=4, accuracy=None)
    with pytest.raises(TypeError, match=_SKIPPED):
        DataclassSGD().setup(net.parameters())
    trainer = Trainer(net, PostInitSGD(), batch_size=4, accuracy=None)
    assert len(trainer.fit(data, epochs=1)) == 1


@pytest.mark.parametrize("transport", ["mpi", "pserver"])
def test_a_dataclass_transport_that_skips_the_base_s_init_is_told_so_at_setup(transport):
    """A dataclass subclass of a transport, set up by hand: MPISync read its own fields first
    and failed with "'Quiet' object has no attribute 'bucket_bytes'" before the made-check."""
    if transport == "mpi":
        from distconv.sync.mpi import MPISync as Base
    else:
        pytest.importorskip("zmq")
        from distconv.sync.ps.client import PServerSync as Base

    Quiet = dataclasses.dataclass(eq=False)(type("Quiet", (Base,), {"__annotations__": {}}))
    net, _ = _model()
    with pytest.raises(TypeError, match=r"^Quiet was made without calling super\(\)\.__init__"):
        Quiet().setup(net.parameters())


class ReadsConfigRank(LocalSync):
    """Reads ``config.rank``, which its config lacks: a base field's name, on another object."""

    def __init__(self, config: SimpleNamespace) -> None:
        rank = config.rank
        super().__init__(SGD(config.lr), rank, config.world_size)


def test_a_config_s_missing_field_named_as_a_base_field_is_the_config_s():
    """Only a base field read on the strategy itself is the skipped base call: the check's
    ``exc.obj is not self`` was untested, and without it a config lacking ``rank`` was told
    "ReadsConfigRank.__init__ failed ... before calling super().__init__"."""
    with pytest.raises(AttributeError, match=r"'types.SimpleNamespace' object has no attr"):
        ReadsConfigRank(SimpleNamespace(lr=0.1, world_size=1))


class SetsItsOwnWorldSize(PlainSGD):
    """Sets the base's fields itself, and skips the base's ``__init__``."""

    def __init__(self, lr: float) -> None:
        self.optimizer, self.rank, self.world_size = SGD(lr), 0, 1
        self.lr, self.zero = lr, True


def test_a_strategy_that_sets_world_size_itself_is_told_where_it_is_made_not_of_dataclasses():
    """The made-check's marker was ``world_size``, setup's ``_examples``: one that set
    world_size itself passed where it was made, and the Trainer then told it how a dataclass
    calls the base. One marker, and a dataclass's hint for a dataclass alone."""
    with pytest.raises(TypeError, match=r"^SetsItsOwnWorldSize\.__init__ returned without"):
        SetsItsOwnWorldSize(0.1)
    unmade = PlainSGD.__new__(PlainSGD)  # made around any __init__ (copy, unpickling)
    with pytest.raises(TypeError, match=r"^PlainSGD was made without calling super") as info:
        unmade.setup(_model()[0].parameters())
    assert "dataclass" not in str(info.value)


def test_a_parameter_server_strategy_set_up_by_hand_is_checked_as_the_base_checks():
    """PServerSync.setup overrode the base's without its check: a dataclass subclass that
    skipped the base's ``__init__`` failed there on a bare AttributeError."""
    from distconv.sync.ps.client import PServerSync

    @dataclasses.dataclass(eq=False)
    class DataclassPS(PServerSync):
        lr: float = 0.1

    with pytest.raises(TypeError, match=r"^DataclassPS was made without calling super\(\)"):
        DataclassPS().setup(_model()[0].parameters())
