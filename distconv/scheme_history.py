"""Which sync schemes an epoch's steps ran under, across resumes.

A run may be resumed under another scheme than its checkpoint's (an asynchronous
parameter-server run resumed over MPI, or with shards in sync mode): a legitimate experiment,
but its numbers are no longer those of one scheme. The chief says so in one warning as the
resumed fit starts training (after the sync's setup: a parameter-server worker learns its mode
and staleness from its shards there). Where the resume falls in the middle of an epoch, that
epoch's metrics line keeps the schemes its earlier steps ran under (:data:`EARLIER`), as each
checkpoint of the epoch does, so that a second resume of the epoch keeps them too. The
resume's log line names the checkpoint's scheme in any case (:func:`written_under`). Each
checkpoint records its world size too: an asynchronous run resumed asynchronously on another
number of workers keeps its scheme, and makes another number of updates a step, which the
chief warns of as well (:func:`other_world`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from distconv.sync.description import sync_scheme

if TYPE_CHECKING:  # resume imports this module
    from distconv.resume import Position

log = logging.getLogger("distconv.resume")

#: the key of a metrics line and of a checkpoint's ``extra`` that lists the schemes the epoch's
#: earlier steps ran under, oldest first: ``[{"scheme": {...}, "to_step": 6}]``, steps up to
#: ``to_step`` (the run's step count, as the line's ``step``) after the entry before; a
#: ``scheme`` of null (:data:`UNRECORDED`) where those steps ran under one no checkpoint recorded
EARLIER = "earlier_schemes"
#: an entry's ``scheme`` (JSON null) where the steps to its ``to_step`` ran under a scheme no
#: checkpoint recorded: an older distconv's checkpoint, resumed in the middle of its epoch
UNRECORDED = None
#: the key of a checkpoint's ``extra`` that holds the world size it was written on: under an
#: asynchronous scheme each worker's push is an update of its own, so another number of workers
#: at the same global batch makes another number of updates a step (:func:`resumed_under`)
WORLD_SIZE = "world_size"


def checkpoint_schemes(extra: Mapping[str, Any], step: int) -> list[dict[str, Any]]:
    """The schemes a checkpoint's epoch ran under up to its ``step``, oldest first (see
    :data:`EARLIER`): those it lists as earlier, then its own ``scheme``. A checkpoint that
    records no scheme (an older distconv's, whose ``scheme`` may be a config's own: no
    ``"sync"`` name in it) ran under one unknown: ``[{"scheme": None, "to_step": step}]``
    (:data:`UNRECORDED`), so that a resume in the middle of its epoch under any scheme lists
    those steps as run under an unrecorded one, not under the new scheme."""
    scheme = extra.get("scheme")
    if not is_scheme(scheme):
        return [{"scheme": UNRECORDED, "to_step": int(step)}]
    earlier = extra.get(EARLIER) if extra.get("step_in_epoch") else None
    kept = [dict(e) for e in earlier if _entry(e)] if isinstance(earlier, list) else []
    return [*kept, {"scheme": dict(scheme), "to_step": int(step)}]


def earlier_schemes(pos: Position, now: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Of the schemes ``pos``'s epoch ran under so far (``pos.schemes``, those of the checkpoint
    resumed: :func:`checkpoint_schemes`), those its steps ran under before the steps under
    ``now``: those that ran one of its steps (an entry up to the step before the epoch's
    first is the epoch before's: a resume at an epoch's start), the last left out where it is
    ``now`` (the steps went on under it, as in an uninterrupted run)."""
    began = pos.step - pos.step_in_epoch  # the step before the epoch's first
    ran = [dict(e) for e in pos.schemes if e["to_step"] > began]
    return ran[:-1] if ran and ran[-1]["scheme"] == now else ran


def checkpoint_facts(
    sync: Any, pos: Position, scheme: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What a checkpoint of ``pos`` records of schemes: ``scheme``, the sync's now (a
    parameter-server worker's are its shards', known since setup; read here where not given:
    a fit gives its epoch's, read once by :class:`~distconv.epoch_tally.EpochTally`), the world
    size (:data:`WORLD_SIZE`), and where the epoch's earlier steps ran under others, those
    (:data:`EARLIER`)."""
    scheme = sync_scheme(sync) if scheme is None else dict(scheme)
    earlier = earlier_schemes(pos, scheme)
    return {
        "scheme": scheme,
        WORLD_SIZE: sync.world_size,
        **({EARLIER: earlier} if earlier else {}),
    }


def resumed_under(pos: Position, now: Mapping[str, Any], world_size: int) -> list[dict[str, Any]]:
    """Warn where the checkpoint ``pos`` was resumed from (the last of ``pos.schemes``) was
    written under another scheme than ``now``, or under an asynchronous one as ``now`` is on
    another number of workers than ``world_size`` (:func:`other_world`); returns the schemes
    the epoch's steps before ``now`` ran under (:func:`earlier_schemes`), for its metrics
    line."""
    if (said := other_world(pos, now, world_size)) is not None:
        log.warning("%s", said)
    then = pos.schemes[-1]["scheme"] if pos.schemes else UNRECORDED
    if then is not UNRECORDED and then != now:  # an unrecorded one: said with the facts
        log.warning(
            "resuming after step %d under another sync scheme than its checkpoint's: %s then, "
            "%s now; %s",
            *(pos.schemes[-1]["to_step"], _text(then), _text(now)),
            f"epoch {pos.epoch + 1}'s metrics line lists the earlier one under {EARLIER!r}"
            if pos.step_in_epoch
            else "the metrics lines from here on say the new one",
        )
    return earlier_schemes(pos, now)


def other_world(pos: Position, now: Mapping[str, Any], world_size: int) -> str | None:
    """What a resume says where the checkpoint ``pos`` was written under an asynchronous
    scheme on another number of workers (``pos.world_size``) than ``world_size``, and ``now``
    is asynchronous too; None otherwise (a synchronous scheme makes one update a step on any
    number, and a checkpoint that records no world size is not compared). The global batch
    stays the same across a resume, so the steps an epoch takes do too, and each step makes
    one update for each worker's push."""
    then = pos.schemes[-1]["scheme"] if pos.schemes else None
    if not (is_asynchronous(then) and is_asynchronous(now)):
        return None
    if pos.world_size is None or pos.world_size == world_size:
        return None
    return (
        f"resuming after step {pos.schemes[-1]['to_step']} on another number of workers than "
        f"its checkpoint's, under the asynchronous scheme {_text(now)}: "
        f"{_workers(world_size)} now, {pos.world_size} then. Each worker's push is an update "
        f"of its own, so each step makes {_updates(world_size)} where it made "
        f"{pos.world_size}, and each epoch (as many steps: the global batch is the same) "
        "updates in that proportion; the run goes on, but does not train as the run "
        "checkpointed would have"
    )


def is_asynchronous(scheme: Any) -> bool:
    """Whether ``scheme`` is one where each push is an update of its own (``"mode":
    "async"``)."""
    return isinstance(scheme, Mapping) and scheme.get("mode") == "async"


def _workers(n: int) -> str:
    return f"{n} worker" if n == 1 else f"{n} workers"


def _updates(n: int) -> str:
    return f"{n} update" if n == 1 else f"{n} updates"


def written_under(schemes: Sequence[Mapping[str, Any]]) -> str:
    """What the resume's log line says of the checkpoint's scheme (the last of ``schemes``,
    :func:`checkpoint_schemes`): ``, written under {"sync": "local"}``, or ``, written under an
    unrecorded scheme`` where the checkpoint records none (an older distconv's); nothing where
    there is no checkpoint's."""
    if not schemes:
        return ""
    then = schemes[-1]["scheme"]
    return f", written under {'an unrecorded scheme' if then is UNRECORDED else _text(then)}"


def _entry(e: Any) -> bool:
    """Whether ``e`` is an entry of :data:`EARLIER`: a scheme, or :data:`UNRECORDED`, and the
    last step it ran."""
    if not isinstance(e, Mapping) or "scheme" not in e or type(e.get("to_step")) is not int:
        return False
    return e["scheme"] is UNRECORDED or is_scheme(e["scheme"])


def is_scheme(scheme: Any) -> bool:
    """Whether ``scheme`` is one :func:`~distconv.sync.description.sync_scheme` writes: a
    mapping that names its sync (``{"sync": "local"}``); a checkpoint's ``scheme`` that is none
    (an older distconv's, or a config's own) records no scheme."""
    return isinstance(scheme, Mapping) and isinstance(scheme.get("sync"), str)


def _text(scheme: Mapping[str, Any]) -> str:
    """A scheme as metrics.jsonl writes it."""
    return json.dumps(dict(scheme))
