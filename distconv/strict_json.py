"""JSON text that strict parsers read: NaN and the infinities written as ``null``.

``json.dumps`` writes a float NaN or infinity as the bare tokens ``NaN``, ``Infinity`` and
``-Infinity``, which no JSON standard has: JavaScript's ``JSON.parse``, Go's ``encoding/json``,
``jq`` and log collectors refuse the whole line. A test loss that overflowed made a line of
``metrics.jsonl`` and the closing ``--log-format json`` result unreadable so.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float in it (in dicts, lists and tuples, however
    deep) replaced by None; anything else as it is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(item) for item in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, **kwargs)`` with NaN and infinities as ``null`` (see the module)."""
    return json.dumps(finite_or_null(value), allow_nan=False, **kwargs)
