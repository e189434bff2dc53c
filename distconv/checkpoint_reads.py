"""Reading a part's tensors of the narrow float types (bfloat16, float8) safetensors' numpy
functions write but cannot read back; the manifest and part looks live in
:mod:`distconv.manifest_reads` (numpy-free), named here too for the callers that read both.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from distconv.manifest_reads import ManifestNotAFile, is_part_file, read_manifest

__all__ = ["ManifestNotAFile", "is_part_file", "load_safetensors", "read_manifest"]


#: safetensors dtypes its numpy functions write but cannot read back: read as unsigned
#: integers of the same width, then viewed as the ``ml_dtypes`` type they hold
_ML_DTYPES = {
    "BF16": ("U16", "bfloat16"),
    "F8_E4M3": ("U8", "float8_e4m3fn"),
    "F8_E4M3FNUZ": ("U8", "float8_e4m3fnuz"),
    "F8_E5M2": ("U8", "float8_e5m2"),
    "F8_E5M2FNUZ": ("U8", "float8_e5m2fnuz"),
    "F8_E8M0": ("U8", "float8_e8m0fnu"),
}


def load_safetensors(raw: bytes, load: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """``load(raw)`` (which checks the header, the dtypes and every tensor's byte range) and the
    metadata. safetensors' numpy functions write bfloat16 (``BF16``) and the float8 types
    (``F8_E4M3`` ...) but cannot read them back: those tensors are read as unsigned integers
    of their width and viewed as their ``ml_dtypes`` type (:data:`_ML_DTYPES`)."""
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    narrow = {
        k: v["dtype"]
        for k, v in header.items()
        if k != "__metadata__" and v.get("dtype") in _ML_DTYPES
    }
    if narrow:
        try:
            import ml_dtypes
        except ImportError:
            kinds = ", ".join(sorted(set(narrow.values())))
            raise ImportError(f"its {kinds} tensors need the ml_dtypes package") from None
        for name, kind in narrow.items():
            header[name]["dtype"] = _ML_DTYPES[kind][0]
        head = json.dumps(header).encode()
        head += b" " * (-len(head) % 8)  # the format's alignment of the data
        raw = len(head).to_bytes(8, "little") + head + raw[8 + size :]
    tensors = load(raw)
    if narrow:
        for name, kind in narrow.items():
            tensors[name] = tensors[name].view(getattr(ml_dtypes, _ML_DTYPES[kind][1]))
    return tensors, header.get("__metadata__") or {}
