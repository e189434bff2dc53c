"""Facts a run's checkpoints carry on from the checkpoint it resumed, not from its config.

A run started from another run's weights (``distconv train --init-from``) records where they
came from (:data:`INIT_FROM`) in each checkpoint. Its config cannot say that again at a resume
(a script's Trainer resuming the run knows nothing of the source), so every resume, whatever
made its checkpoints, carries it on from the checkpoint it resumed; a fresh run carries none.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

#: the key of a checkpoint's ``extra`` that records where a run's first weights came from
INIT_FROM = "init_from"

#: the keys of a checkpoint's ``extra`` a resume carries on into the run's next checkpoints
CARRIED_ON = (INIT_FROM,)


def carry_on(
    facts: MutableMapping[str, Any], before: Mapping[str, Any], extra: Mapping[str, Any]
) -> dict[str, Any]:
    """Put into a run's ``facts`` those of a checkpoint's ``extra`` it carries on
    (:data:`CARRIED_ON`), in place of ``before``, what an earlier resume carried (another
    checkpoint's, maybe another run's); returns what is carried now, ``before`` of the next.
    ``extra`` empty: a fresh run, which carries none."""
    for key in before:
        facts.pop(key, None)
    carried = {key: extra[key] for key in CARRIED_ON if key in extra}
    facts.update(carried)
    return carried
