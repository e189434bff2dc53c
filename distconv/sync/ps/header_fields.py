"""What a parameter-server request's header may carry: every field with its type
(:data:`FIELDS`; :data:`TYPES`, the exact types msgpack may decode each to) and the fields each
operation must carry (:data:`REQUIRED`; :data:`NEEDED`, with the ones every request carries).
:func:`~distconv.sync.ps.wire.unpack_header` checks every request against them before any of
it is used, and a worker every reply's fields of these names (a shard's hello reply whose
``build`` is no string is refused as malformed); docs/protocol.md's tables say the same for
other clients."""

from __future__ import annotations

#: every field a request may carry, with its type; ``op`` picks the ones it needs
FIELDS: dict[str, type | tuple[type, ...]] = {
    "v": int,
    "op": str,
    "id": int,
    "job": str,
    "rank": int,
    "arrays": list,
    "host": str,
    "process": str,
    "build": str,  # a worker's build_id(): no shard reads it, yet it is checked as every field
    "incarnation": list,  # its entries: incarnations.hello_incarnation
    "description": str,
    "digest": str,
    "part_digests": dict,
    "step": int,
    "count": int,
    "lr": float,
    "blocks": list,
    "versions": list,
    "rows": list,
    "params": list,
    "table": list,
    "optimizer": dict,
    "keys": list,
    "with_values": bool,
    "tag": str,
    "keep": int,
    "part": int,
    "parts": int,
    "run": int,
    "setup": int,
    "value": (list, str, type(None)),
    "error": str,
}
#: the fields each request operation must carry (besides v, op, id, job, rank, arrays)
REQUIRED: dict[str, tuple[str, ...]] = {
    "hello": ("host", "digest"),  # and a small job's description (job_hello)
    "seed": ("params", "table", "optimizer"),
    "pull": ("blocks",),
    "push": ("step", "count", "lr", "params", "blocks", "versions"),
    "get_state": ("blocks",),
    "set_state": ("blocks", "keys"),
    "gather": ("tag", "value"),
    "stats": (),
    "beat": (),
    "checkpoint": ("step",),
    "bye": (),
    "abandon": ("step",),
}
COMMON = ("v", "op", "id", "job", "rank", "arrays")
#: the fields every request of an op needs, checked in this order
NEEDED = {op: COMMON + fields for op, fields in REQUIRED.items()}


def _exact_types(kind: type | tuple[type, ...]) -> frozenset[type]:
    """The exact types msgpack may decode a field of ``kind`` to: a float field takes ints,
    an int field never a bool (msgpack decodes to exact built-in types, never subclasses)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return frozenset(kinds) | ({int} if float in kinds else set())


#: ``FIELDS`` as sets of exact types, for a check with one set lookup per field
TYPES = {key: _exact_types(kind) for key, kind in FIELDS.items()}
