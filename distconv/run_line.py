"""What a metrics log's first line says of its run (:data:`~distconv.metrics.RUN`): its
settings and job id, so that a log read apart from its folder (a sweep's, collected from
several hosts, or its folder's name reused) says which run it is, and the software that
computed its numbers, so that it says what reproduces them.

The settings are those a checkpoint records of the run (its facts: data, model, epochs, batch
size, dtype, the training set's short fingerprint, ...), the optimizer's config (name,
learning rate, ...) and the seed; not the network's layers, which a checkpoint compares and a
reader of the log needs not (the model's name says it). The software is distconv's build
(:func:`~distconv.build_identity.build_id`), numpy's version and the BLAS numpy computes with:
float32 results change in their last bits with any of them, and the checkpoints that also
record the build are pruned to ``--keep-checkpoints``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from distconv import plain_json
from distconv.build_identity import build_id
from distconv.kernels.blas import numpy_blas

#: the facts a checkpoint records that the log's line leaves out: long, and for a resume's check
LEFT_OUT = ("layers",)
#: the keys of a run line that name the software its numbers were computed with; a resume under
#: another of any of them says its own run line again (:func:`software_changed`)
SOFTWARE = ("build", "numpy", "blas")


def run_line(
    facts: Mapping[str, Any], optimizer: Mapping[str, Any], job: str | None
) -> dict[str, Any]:
    """The run as its metrics log's first line says it: ``facts`` (a run's, as
    :class:`~distconv.resume.StepCheckpoints` holds them) less :data:`LEFT_OUT`, each value
    in its JSON form (``train_data``, the training set's
    :func:`~distconv.data.fingerprint`, is short: its length, feeds and a 16-digit digest,
    computed already for the job check), then ``optimizer`` (the sync's
    ``optimizer_config()``: its name and learning rate), ``job`` (the job id; None: the run
    has none) and the software (:data:`SOFTWARE`: :func:`software`)."""
    said = {
        str(key): json.loads(plain_json.dumps(value))
        for key, value in facts.items()
        if key not in LEFT_OUT
    }
    optimizer_said = json.loads(plain_json.dumps(dict(optimizer)))
    return {**said, "optimizer": optimizer_said, "job": job, **software()}


def software() -> dict[str, str | None]:
    """The software this process computes with, as :data:`SOFTWARE` names it: distconv's
    build (``0.1.0+3f2a9c0d41b7e655``), numpy's version (``2.4.6``) and numpy's BLAS
    (:func:`~distconv.kernels.blas.numpy_blas`; None where none is found)."""
    return {"build": build_id(), "numpy": np.__version__, "blas": numpy_blas()}


def software_changed(before: Mapping[str, Any] | None, run: Mapping[str, Any]) -> bool:
    """Whether ``run`` (a run line) names other software (:data:`SOFTWARE`) than ``before``,
    the run line in force where a resume keeps a log's lines (the last kept line's that has
    one; None where none has, a log older than run lines): another build, numpy or BLAS,
    whose numbers may differ in their last bits, so the resume's first line says its own."""
    return any((before or {}).get(key) != run.get(key) for key in SOFTWARE)
