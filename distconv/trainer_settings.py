"""The :class:`~distconv.trainer.Trainer` settings a run is made of, fixed once it is made.

The Trainer computes its run's config (what each checkpoint records and a resume compares)
and its checkpoints' directory when it is made. A setting assigned after (``t.batch_size =
64`` between two fits, in a notebook) trained with the new value while the checkpoints
recorded the old one, and a later resume of the same run was refused as another run's. So
each is read-only after ``__init__``, and assigning one says how to get another value.
"""

from __future__ import annotations

from typing import Any


class FixedSetting:
    """A data descriptor: set once (in ``__init__``), then read-only, with an
    :class:`AttributeError` that names the setting and the way to another value."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.slot = name, f"_fixed_{name}"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        try:
            return obj.__dict__[self.slot]
        except KeyError:
            raise AttributeError(f"{type(obj).__name__}.{self.name} is not set yet") from None

    def __set__(self, obj: Any, value: Any) -> None:
        if self.slot in obj.__dict__ and not obj.__dict__.get(MADE):
            kind = type(obj).__name__  # set twice before made: a subclass's, then __init__'s
            raise AttributeError(
                f"{kind}.{self.name} was set before Trainer.__init__ set it from its "
                f"argument (by a subclass's __init__, before super().__init__()?): pass "
                f"{self.name}=... to super().__init__() instead, which records it in the run's "
                "config and checkpoints"
            )
        if self.slot in obj.__dict__:
            kind = type(obj).__name__
            raise AttributeError(
                f"{kind}.{self.name} is fixed once the {kind} is made: its run's config and "
                f"checkpoints record it (a resume compares them), and a changed one trained "
                f"with the new value while they said the old; make a new {kind}(network, sync, "
                f"..., {self.name}=...) on the same network and sync instead (it goes on "
                "from their trained weights and optimizer state)"
            )
        obj.__dict__[self.slot] = value


#: the key an instance's ``__dict__`` holds once its settings are made (:func:`settings_made`)
MADE = "_fixed_settings_made"


def settings_made(obj: Any) -> None:
    """``obj``'s settings are made (its ``__init__`` set each): from now on each is read-only."""
    obj.__dict__[MADE] = True


class TrainerSettings:
    """The Trainer's fixed settings (a mixin): what its config and checkpoints are made of."""

    batch_size = FixedSetting()
    accumulate = FixedSetting()
    seed = FixedSetting()
    lr_decay = FixedSetting()
    dtype = FixedSetting()
    checkpoint_every = FixedSetting()
    out_dir = FixedSetting()
