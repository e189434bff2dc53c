"""What a checkpoint file's SHA-256 covers, kept in its metadata under :data:`DIGEST_KEY`:
every metadata entry but the digest itself, then every tensor (format version 2 on), so that a
changed epoch fails the check like a changed weight; in format version 1 (the single
``checkpoint.safetensors`` of a distconv before step checkpoints, until 11-30) the tensors
alone (:func:`tensors_digest`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import numpy as np

#: the metadata key a checkpoint keeps its digest under
DIGEST_KEY = "sha256"


def digest(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> str:
    """SHA-256 over every metadata entry but the digest itself, then every tensor.

    Covering the metadata means an edited epoch or step fails the check instead of changing
    what a resumed run does.
    """
    h = hashlib.sha256()
    covered = {k: v for k, v in metadata.items() if k != DIGEST_KEY}
    h.update(json.dumps(covered, sort_keys=True).encode())
    for name in sorted(tensors):
        a = tensors[name]
        h.update(f"|{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def tensors_digest(tensors: Mapping[str, np.ndarray]) -> str:
    """Format version 1's SHA-256: every tensor, each after its ``name|dtype|shape|``, and no
    metadata. A file of that version is whole in its tensors where this matches; its step,
    epoch and config are covered by nothing, so only its weights are read from it."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = tensors[name]
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()
