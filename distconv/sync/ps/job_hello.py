"""The job a worker's ``hello`` names, and the shard's check that every hello names one job.

A hello once carried the whole job description as JSON text: each parameter's layout and,
from the Trainer, each layer's structure, a few hundred bytes a layer. A model of about 3,500
convolution layers passed :data:`~distconv.sync.ps.wire.MAX_HEADER_BYTES`, the shard could not
read the hello, and the worker only heard that it went unanswered. So a hello always carries
the description's :func:`~distconv.sync.base.digest` (of :func:`~distconv.sync.base.as_sent`,
as in the workers' start-up check, :mod:`~distconv.sync.ps.job_check`) and the text itself only
within :data:`DESCRIPTION_BUDGET`. The shard compares digests; where both hellos carried their
text it names the first difference, as it always did.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distconv.sync.base import as_sent, digest, first_difference
from distconv.sync.ps.wire import MAX_HEADER_BYTES, WireError, json_map, short

#: the most bytes of description text a hello carries: a quarter of the header cap, so that the
#: rest of the hello (host, process, run: tens of bytes) and msgpack's framing (a few bytes a
#: field) can never push the header past the cap; a longer description travels as its digest
DESCRIPTION_BUDGET = MAX_HEADER_BYTES // 4
#: a digest as :func:`~distconv.sync.base.digest` writes it: 16 lowercase hex digits
_DIGEST = re.compile(r"[0-9a-f]{16}")


def hello_fields(description: Mapping[str, Any]) -> dict[str, str]:
    """The job's fields of a worker's hello: ``digest`` always, ``description`` (JSON text)
    when it is at most :data:`DESCRIPTION_BUDGET` bytes."""
    sent = as_sent(description)
    fields = {"digest": digest(sent)}
    text = json.dumps(sent, sort_keys=True)  # ASCII (json escapes the rest): chars are bytes
    if len(text) <= DESCRIPTION_BUDGET:
        fields["description"] = text
    return fields


@dataclass(frozen=True)
class HelloJob:
    """The job one hello names: its description's digest, and the description (parsed) when
    the hello carried it."""

    digest: str
    described: dict[str, Any] | None = None

    @classmethod
    def of(cls, header: Mapping[str, Any]) -> HelloJob:
        """The job of a hello whose header passed :func:`~distconv.sync.ps.wire.unpack_header`.

        Raises:
            WireError: a digest that is not 16 lowercase hex digits, a description that is not
                a JSON map (it would become the job's), or a digest that is not the
                description's (the shard compares digests alone).
        """
        claimed = header["digest"]
        if not _DIGEST.fullmatch(claimed):
            raise WireError(f"hello: digest {short(claimed)} is not 16 lowercase hex digits")
        if "description" not in header:
            return cls(claimed)
        described = json_map(header["description"], "hello: description")
        try:
            actual = digest(described)
        except RecursionError:  # nested deeper than json writes back
            raise WireError("hello: description nested too deep") from None
        if actual != claimed:
            raise WireError(f"hello: digest {claimed} is not its description's ({actual})")
        return cls(claimed, described)

    def difference(self, job: HelloJob) -> str | None:
        """None when this hello names ``job`` (the first accepted hello's); else why not, as a
        sentence: the first difference where both carried their description, else both
        digests ("here" is this hello's, "there" the job's, as in
        :func:`~distconv.sync.base.first_difference`)."""
        if self.digest == job.digest:
            return None
        if self.described is not None and job.described is not None:
            diff = first_difference(self.described, job.described)
            if diff is not None:  # always, for digests that differ; the digests else
                return diff
        # the workers' own start-up check cannot name it either: it runs after the hellos, and
        # a refused rank never joins it (the others only hear that it closed)
        return (
            f"description digest {self.digest} here, {job.digest} there; a description over "
            f"{DESCRIPTION_BUDGET} bytes travels in a hello as its digest alone, so what differs "
            f"cannot be named: compare this rank's config and model with the other ranks'"
        )
