"""The sync contract's collectives as one process has them, refused to a strategy of several.

``SyncStrategy``'s ``broadcast_parameters``, ``allreduce_sum``, ``barrier`` and ``all_equal``
are a lone process's: they do nothing, or sum this rank's values alone. A transport of several
ranks that left one of them to the base trained on without a word, wrong: ranks that start
apart after a resume (only the chief loads the checkpoint), one rank's loss logged as the
epoch's, a rank of another learning rate let through the job check. So a strategy whose world
size is over 1 and whose class leaves any of them to the base is refused, naming every one:
by the Trainer it is given to (``trainer_args.check_parts``, before any data is read), by the
base's ``setup`` before its job check, and by each default itself, for a strategy whose own
``setup`` does not call the base's, used without a Trainer. An override that calls
``super()``'s is its transport's own, and passes.
"""

from __future__ import annotations

import inspect
from typing import Any

#: the base's collectives, each of them one process's
COLLECTIVES = ("broadcast_parameters", "allreduce_sum", "barrier", "all_equal")


def left_to_base(cls: type) -> list[str]:
    """The :data:`COLLECTIVES` that ``cls``, a ``SyncStrategy``, takes from ``SyncStrategy``:
    whose function, under every wrapper that keeps what it wraps as ``__wrapped__``
    (``functools.wraps``: the closed-sync guard, a timing wrapper that a class's own
    ``__init_subclass__`` or metaclass puts around each collective), is the base's."""
    from distconv.sync.base import SyncStrategy  # it imports this module

    def own(owner: type, name: str) -> Any:
        return inspect.unwrap(getattr(owner, name))

    return [name for name in COLLECTIVES if own(cls, name) is own(SyncStrategy, name)]


def refuse_one_process_collectives(strategy: Any, *names: str) -> None:
    """Raise where ``strategy`` runs with other ranks but its class leaves any of ``names``
    (all of :data:`COLLECTIVES` where none is given) to ``SyncStrategy``'s versions.

    Raises:
        TypeError: naming the class, its rank and world size, and each collective left to the
            base, as a class that lacks an abstract method cannot be made.
    """
    if strategy.world_size == 1:
        return
    left = [name for name in left_to_base(type(strategy)) if name in (names or COLLECTIVES)]
    if left:
        them = "it" if len(left) == 1 else "them"
        named = " and ".join([", ".join(left[:-1]), left[-1]] if len(left) > 1 else left)
        raise TypeError(
            f"{type(strategy).__name__} is rank {strategy.rank} of {strategy.world_size} but "
            f"leaves {named} to SyncStrategy, whose versions are one process's (they send "
            f"nothing and sum this rank's values alone): override {them} for its transport (a "
            "no-op of its own where it has nothing to send, as the parameter server's "
            "broadcast_parameters; docs/architecture.md, 'The sync contract')"
        )
