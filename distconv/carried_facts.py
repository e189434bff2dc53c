"""Facts a run's checkpoints carry on from the checkpoint it resumed, not from its config.

A run started from another run's weights (``distconv train --init-from``) records where they
came from (:data:`INIT_FROM`) in each checkpoint. Its config cannot say that again at a resume
(a script's Trainer resuming the run knows nothing of the source), so every resume, whatever
made its checkpoints, carries it on from the checkpoint it resumed; a fresh run carries none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the key of a checkpoint's ``extra`` that records where a run's first weights came from
INIT_FROM = "init_from"

#: the keys of a checkpoint's ``extra`` a resume carries on into the run's next checkpoints
CARRIED_ON = (INIT_FROM,)


def carried_on(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The facts of a checkpoint's ``extra`` that the run resumed from it records again."""
    return {key: extra[key] for key in CARRIED_ON if key in extra}
