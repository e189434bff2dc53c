"""The job a worker's ``hello`` names, and the shard's check that every hello names one job.

A hello once carried the whole job description as JSON text: each parameter's layout and,
from the Trainer, each layer's structure, a few hundred bytes a layer. A model of about 3,500
convolution layers passed :data:`~distconv.sync.ps.wire.MAX_HEADER_BYTES`, the shard could not
read the hello, and the worker only heard that it went unanswered. So a hello always carries
the description's :func:`~distconv.sync.description.digest` (of
:func:`~distconv.sync.description.as_sent`, as in the workers' start-up check,
:mod:`~distconv.sync.ps.job_check`), and of the text only
what fits in :data:`DESCRIPTION_BUDGET`: all of it, or its smaller top-level entries (the
config's settings, the optimizer) beside the digests of the large ones (the parameters' layout,
the model). The shard compares digests, and names the first difference: by value where both
hellos carried it (``config.batch_size: 16 here, 8 there``), else the entry whose digests
differ (``parameters``). A later setup of the same workers may differ in the optimizer's rate
alone (:meth:`HelloJob.new_rate`: ``optimizer.set_base_lr`` between fits), which the shard
takes where every rank's hello of that setup carries it (:mod:`~distconv.sync.ps.startup`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distconv.sync.description import as_sent, digest, first_differing, key_order
from distconv.sync.ps.wire import MAX_HEADER_BYTES, WireError, json_map, short

#: the most bytes of description text a hello carries: a quarter of the header cap, so that the
#: rest of the hello (host, process, run: tens of bytes) and msgpack's framing (a few bytes a
#: field) can never push the header past the cap; a longer description travels as its digest
DESCRIPTION_BUDGET = MAX_HEADER_BYTES // 4
#: a digest as :func:`~distconv.sync.description.digest` writes it: 16 lowercase hex digits
_DIGEST = re.compile(r"[0-9a-f]{16}")
#: the most characters of each value a refused hello's difference quotes: both values, so the
#: shard's cut of the whole line (startup.DIFFERENCE_CHARS) never drops the job's, "there"
VALUE_CHARS = 400
#: the field, and its value, of a shard's error reply that refuses this job, not a request
#: (docs/protocol.md): another job's hello, ranks that run different jobs leading a failure,
#: another job's id. The worker raises JobRefused on it (a shard without it: SyncError)
REFUSED_JOB = {"refused": "job"}


def hello_fields(description: Mapping[str, Any]) -> dict[str, Any]:
    """The job's fields of a worker's hello: ``digest`` always; ``description``, the JSON text
    of the whole description where it fits in :data:`DESCRIPTION_BUDGET`, else of as many of
    its top-level entries as fit, the smallest first; and ``part_digests``, the digest of each
    entry left out (:func:`part_digest`), so that a shard can still name the entry that
    differs."""
    sent = as_sent(description)
    fields: dict[str, Any] = {"digest": digest(sent)}
    text = json.dumps(sent, sort_keys=True)  # ASCII (json escapes the rest): chars are bytes
    if len(text) <= DESCRIPTION_BUDGET:
        fields["description"] = text
        return fields
    kept, left, room = {}, {}, DESCRIPTION_BUDGET
    sizes = {k: len(json.dumps({k: v}, sort_keys=True)) for k, v in sent.items()}
    for key, size in sorted(sizes.items(), key=lambda item: item[1]):
        if size < room:
            kept[key], room = sent[key], room - size
        else:
            left[key] = part_digest(key, sent[key])
    if len(json.dumps(left)) <= DESCRIPTION_BUDGET:  # else (thousands of entries) the digest
        fields.update(description=json.dumps(kept, sort_keys=True), part_digests=left)
    return fields


def hello_setup(header: Mapping[str, Any]) -> int | None:
    """The hello's ``setup``, its worker's number of the setup it is of (a count of its run's
    setups begun, from 1), or None where it carries none (an older worker).

    Raises:
        WireError: a number below 0 (the field's type, an int, is the header check's).
    """
    setup = header.get("setup")
    if setup is not None and setup < 0:
        raise WireError(f"hello: setup {setup} is not a count of its worker's setups (an int >= 0)")
    return setup


#: the modes a shard runs in (its ``--mode``)
MODES = ("sync", "async")


def hello_reply_problem(header: Mapping[str, Any]) -> str | None:
    """What is wrong with the settings in a shard's ``hello`` reply, or None: its ``mode`` one
    of :data:`MODES` (a reply without it set the worker up in mode None, read by no check as
    sync); ``shard``, ``num_shards`` and ``workers``, where present, ints (``false`` compared
    equal to shard 0); its caps, where present, positive ints (a string failed the first size
    check with a TypeError naming no shard, a 0 blamed the layout)."""
    if header.get("mode") not in MODES:
        return f"mode {short(header.get('mode'))}, not one of {list(MODES)}"
    for key in ("shard", "num_shards", "workers"):
        if key in header and type(header[key]) is not int:
            return f"{key} {short(header[key])} is not an integer"
    for key in ("max_message_bytes", "max_frame_bytes"):
        if key in header and (type(header[key]) is not int or header[key] < 1):
            return f"{key} {short(header[key])} is not a positive integer"
    return None


def part_digest(key: str, value: Any) -> str:
    """The digest of one top-level entry of a description, as both ends compute it."""
    return digest({key: value})


@dataclass(frozen=True)
class HelloJob:
    """The job one hello names: its description's digest, the description (parsed) when the
    hello carried it, or the entries it carried and the digests of those it left out."""

    digest: str
    described: dict[str, Any] | None = None
    left_out: dict[str, str] | None = None
    #: every top-level entry's :func:`part_digest`, carried or computed (with ``described``)
    entries: dict[str, str] | None = None

    @classmethod
    def of(cls, header: Mapping[str, Any]) -> HelloJob:
        """The job of a hello whose header passed :func:`~distconv.sync.ps.wire.unpack_header`.

        Raises:
            WireError: a digest that is not 16 lowercase hex digits, a description that is not
                a JSON map (it would become the job's), a digest that is not the
                description's (the shard compares digests alone), or part digests beside no
                description, not 16 lowercase hex digits, or for an entry it holds.
        """
        claimed = header["digest"]
        if not _DIGEST.fullmatch(claimed):
            raise WireError(f"hello: digest {short(claimed)} is not 16 lowercase hex digits")
        left_out = header.get("part_digests")
        if "description" not in header:
            if left_out is not None:
                raise WireError("hello: part_digests without a description")
            return cls(claimed)
        described = json_map(header["description"], "hello: description")
        try:  # here, not in difference(): a later hello must never fail on this one's nesting
            entries = {k: part_digest(k, v) for k, v in described.items()}
            actual = digest(described)
        except RecursionError:  # nested deeper than json writes back
            raise WireError("hello: description nested too deep") from None
        if left_out is not None:  # entries of the description: the whole is not here to check
            _check_left_out(left_out, described)
            return cls(claimed, described, left_out, {**entries, **left_out})
        if actual != claimed:
            raise WireError(f"hello: digest {claimed} is not its description's ({actual})")
        return cls(claimed, described, None, entries)

    def difference(self, job: HelloJob) -> str | None:
        """None when this hello names ``job`` (the first accepted hello's); else why not, as a
        sentence: the first difference where both carried their description, else the first
        entry that differs, by value where both carried it, else by digest ("here" is this
        hello's, "there" the job's, as in :func:`~distconv.sync.description.first_difference`)."""
        if self.digest == job.digest:
            return None
        if self.described is not None and job.described is not None:
            if self.left_out is None and job.left_out is None:
                diff = _difference(self.described, job.described)
            else:
                diff = _entry_difference(self, job)
            if diff is not None:  # always, for digests that differ; the digests else
                return diff
        # the workers' own start-up check cannot name it either: it runs after the hellos, and
        # a refused rank never joins it (the others only hear that it closed)
        return (
            f"description digest {self.digest} here, {job.digest} there; a description over "
            f"{DESCRIPTION_BUDGET} bytes travels in a hello as its digest alone, so what differs "
            f"cannot be named: compare this rank's config and model with the other ranks'"
        )

    def new_rate(self, job: HelloJob) -> float | None:
        """This hello's ``optimizer.lr`` where its job differs from ``job`` in that alone (a
        rate set between fits: ``optimizer.set_base_lr``), else None: the same job, another
        difference too, or a hello that carried its optimizer as a digest alone (what else
        differs cannot be told)."""
        ours, theirs = _optimizer(self), _optimizer(job)
        if ours is None or theirs is None or "lr" not in ours:
            return None
        lr = ours["lr"]
        # a JSON float, as the seed's optimizer takes it (out of range: another job, refused)
        if type(lr) is not float or not (math.isfinite(lr) and lr > 0) or ours == theirs:
            return None
        if part_digest(_OPTIMIZER, _without_lr(ours)) != part_digest(
            _OPTIMIZER, _without_lr(theirs)
        ):
            return None
        entries, held = self.entries or {}, job.entries or {}
        if {k: d for k, d in entries.items() if k != _OPTIMIZER} != {
            k: d for k, d in held.items() if k != _OPTIMIZER
        }:
            return None
        return lr


#: the description's entry that holds the optimizer's config (``description.job_description``)
_OPTIMIZER = "optimizer"


def _optimizer(job: HelloJob) -> dict[str, Any] | None:
    """The optimizer config a hello carried, or None where it carried none (or no map)."""
    found = (job.described or {}).get(_OPTIMIZER)
    return found if isinstance(found, dict) else None


def _without_lr(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != "lr"}


def _entry_difference(ours: HelloJob, theirs: HelloJob) -> str | None:
    """The first top-level entry (in :func:`~distconv.sync.description.first_difference`'s order)
    whose digest differs: by value where neither side left it out, else by its digests."""
    a, b = ours.entries or {}, theirs.entries or {}  # both set: both carried a description
    for key in sorted(set(a) | set(b), key=key_order):
        if a.get(key) == b.get(key):
            continue
        if key not in (ours.left_out or {}) and key not in (theirs.left_out or {}):
            return _difference(_only(ours.described, key), _only(theirs.described, key))
        return (
            f"{key}: digest {a.get(key, '<missing>')} here, {b.get(key, '<missing>')} there "
            f"(too large for a hello to carry, so what in it differs cannot be named: compare "
            f"this rank's {key} with the other ranks')"
        )
    return None


def _difference(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> str | None:
    """:func:`~distconv.sync.description.first_difference`'s sentence with both values cut to
    :data:`VALUE_CHARS` (a hello's values may be hundreds of KB) from a little before where
    their reprs first differ: two long values that differ late (a layer's seventh projection)
    cut from their starts would be quoted alike."""
    found = first_differing(ours, theirs)
    if found is None:
        return None
    where, *values = found
    a, b = (repr(v) for v in values)
    start = max(0, len(os.path.commonprefix([a, b])) - VALUE_CHARS // 4)
    return f"{where}: {_cut(a, start)} here, {_cut(b, start)} there"


def _cut(text: str, start: int) -> str:
    """``text``, or where longer than :data:`VALUE_CHARS`, a cut of it from ``start``."""
    if len(text) <= VALUE_CHARS:
        return text
    piece = text[start : start + VALUE_CHARS - 6]
    return f"{'...' if start else ''}{piece}{'...' if start + len(piece) < len(text) else ''}"


def _only(described: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
    """The entry ``key`` of ``described`` alone, or nothing where it has none."""
    return {key: described[key]} if described is not None and key in described else {}


def _check_left_out(left_out: Any, described: Mapping[str, Any]) -> None:
    """WireError unless ``left_out`` maps one or more entries the description lacks to digests
    (none left out would be a whole description, whose digest :meth:`HelloJob.of` checks)."""
    if (
        not isinstance(left_out, dict)
        or not left_out
        or not all(
            isinstance(k, str)
            and k not in described
            and isinstance(d, str)
            and _DIGEST.fullmatch(d)
            for k, d in left_out.items()
        )
    ):
        raise WireError(
            "hello: part_digests must map entries the description lacks to 16 lowercase hex digits"
        )
