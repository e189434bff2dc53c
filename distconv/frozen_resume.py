"""Frozen parameters (``static``) at a resume: no part of the sync, so restored on the chief
alone and holding no optimizer state while frozen."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from distconv.parameter import Parameter
from distconv.sync import SyncError

if TYPE_CHECKING:
    from distconv.resume import Position

log = logging.getLogger("distconv.resume")

OptimState = dict[str, dict[str, Any]]  # as distconv.resume names it


def without_frozen(state: OptimState, params: Sequence[Parameter]) -> OptimState:
    """The optimizer state of the parameters trained now. One frozen since the checkpoint keeps
    its restored value and needs no state while frozen (it starts afresh if unfrozen); the
    sync, which knows only what it trains, refuses state of any name it does not know."""
    frozen = sorted({p.name for p in params if p.static} & set(state))
    if frozen:
        log.warning("not restoring the optimizer state of %s: frozen since the checkpoint", frozen)
    return {name: s for name, s in state.items() if name not in frozen}


def refuse_frozen_resume(params: Sequence[Parameter], pos: Position, world_size: int) -> None:
    """Frozen parameters are restored on the chief alone and are not part of the sync, so other
    ranks would keep their initial values: refuse to resume several ranks with any."""
    frozen = [p.name for p in params if p.static]
    if frozen and pos.step and world_size > 1:
        raise SyncError(
            f"cannot resume {world_size} ranks with frozen parameters {frozen}: their "
            "checkpointed values would reach rank 0 only; resume on one rank, or unfreeze them"
        )
