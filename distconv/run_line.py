"""What a metrics log's first line says of its run (:data:`~distconv.metrics.RUN`): its
settings and job id, so that a log read apart from its folder (a sweep's, collected from
several hosts, or its folder's name reused) says which run it is.

The settings are those a checkpoint records of the run (its facts: data, model, epochs, batch
size, dtype, ...), the optimizer's config (name, learning rate, ...) and the seed; not the
network's layers nor the training set's fingerprint, which a checkpoint compares and a reader
of the log needs not (the model's name says it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from distconv import plain_json

#: the facts a checkpoint records that the log's line leaves out: long, and for a resume's check
LEFT_OUT = ("layers", "train_data")


def run_line(
    facts: Mapping[str, Any], optimizer: Mapping[str, Any], job: str | None
) -> dict[str, Any]:
    """The run as its metrics log's first line says it: ``facts`` (a run's, as
    :class:`~distconv.resume.StepCheckpoints` holds them) less :data:`LEFT_OUT`, each value
    in its JSON form, then ``optimizer`` (the sync's ``optimizer_config()``: its name and
    learning rate) and ``job`` (the job id; None: the run has none)."""
    said = {
        str(key): json.loads(plain_json.dumps(value))
        for key, value in facts.items()
        if key not in LEFT_OUT
    }
    return {**said, "optimizer": json.loads(plain_json.dumps(dict(optimizer))), "job": job}
