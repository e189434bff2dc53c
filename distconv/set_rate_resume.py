"""A learning rate set with :meth:`~distconv.optim_base.Optimizer.set_base_lr` since a
checkpoint was written: the one difference in the optimizer a resume of it accepts.

A notebook fits, sets a new rate, and fits on with ``resume=True``. In memory that goes on at
the new rate; with an output directory the fit resumes from the newest checkpoint, written at
the old rate, whose ``optimizer.lr`` the resume compares with this run's and refused. So where
this run's optimizer was moved away from the checkpoint's rate by ``set_base_lr`` (it records
each rate it left, :attr:`~distconv.optim_base.Optimizer.earlier_base_lrs`), and the two
optimizers differ in nothing else, the resume goes on at the new rate, warning of it. A run whose
optimizer was built with another rate (``--lr`` on a command line's resume) set none: refused,
as before (docs/operations.md, on resume).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from distconv.optim_base import Optimizer

log = logging.getLogger("distconv.resume")


def rate_set_since(
    path: Any, theirs: Mapping[str, Any], ours: Mapping[str, Any], optimizer: Optimizer
) -> Mapping[str, Any]:
    """This run's facts ``ours`` to compare with the checkpoint's ``theirs`` (at ``path``):
    with the checkpoint's ``optimizer.lr`` in place of this run's where this run's
    ``optimizer`` left that rate with ``set_base_lr`` and differs from the checkpoint's in its
    rate alone, warned of; else ``ours`` as it is (compared as before). An optimizer whose
    ``__init__`` skipped the base's records no rates (the class's empty default): compared
    as before."""
    held, now = theirs.get("optimizer"), ours.get("optimizer")
    if not (isinstance(held, Mapping) and isinstance(now, Mapping)):
        return ours
    lr, new = held.get("lr"), now.get("lr")
    earlier = optimizer.earlier_base_lrs
    if lr == new or lr not in earlier or {**held, "lr": None} != {**now, "lr": None}:
        return ours
    # a warning, as warn_of_config_changes' (resume_facts.py): before set_base_lr, this
    # resume was refused, and a script that sets a rate on a fresh optimizer reaches it too
    log.warning(
        "resuming %s at optimizer.lr %r, set with optimizer.set_base_lr since this checkpoint "
        "was written at %r: the rate alone changed, so the run goes on at the new one; where "
        "that was not meant, set the checkpoint's rate, or start a new run in another output "
        "directory",
        path,
        new,
        lr,
    )
    return {**ours, "optimizer": {**now, "lr": lr}}
