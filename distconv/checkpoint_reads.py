"""Looking at a run's checkpoint files without taking an I/O error for damage or absence.

A manifest or part the OS cannot read now (EIO, EACCES, a network file system's hiccup) may be
whole: passed over as damaged or missing, the resume would go on from an older step, and an
asynchronous run lose its newer state for good. These raise
:class:`~distconv.checkpoint.CheckpointReadError` instead, which renames nothing. And reading a
part's tensors of the narrow float types (bfloat16, float8) safetensors' numpy functions write
but cannot read back.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from distconv.checkpoint import CheckpointError, CheckpointReadError
from distconv.checkpoint_file_kinds import special_kind
from distconv.files import describe_os_error


class ManifestNotAFile(CheckpointError):
    """A manifest's name is held by a named pipe, a socket or a device: no save wrote it, and
    no retry makes it a manifest (unlike a :class:`CheckpointReadError`). The message names
    what it is and says to move it away."""


def read_manifest(path: Path) -> bytes:
    """The manifest's bytes; raises FileNotFoundError and IsADirectoryError as they are.

    Raises:
        ManifestNotAFile: a named pipe, a socket or a device, refused at once: opened, a pipe
            without a writer held a resume, or a save's pruning, for ever. Looked at before
            the open: a save renames a regular file into a manifest's name, never a pipe.
        CheckpointReadError: the OS could not read it (EIO, EACCES).
    """
    try:
        kind = special_kind(path.stat().st_mode)
        if kind is None:
            return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        raise
    except OSError as exc:  # EIO, EACCES, a network file system's hiccup: may pass
        raise CheckpointReadError(
            f"checkpoint manifest {path} cannot be read: {describe_os_error(exc)}; nothing is "
            "skipped or renamed, retry once it can be read"
        ) from None
    raise ManifestNotAFile(
        f"{path} is {kind}, not a manifest (a save writes a regular file): move it out of "
        f"{path.parent}"
    )


def is_part_file(path: Path) -> bool:
    """Whether a checkpoint part is a file; False only for one that is not there (or not a file).

    ``os.stat`` itself: ``Path.is_file`` raises for an I/O error on some Python versions and
    answers False on others, which would pass an unreadable part over as missing.
    """
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:  # EACCES, EIO: the part may be whole
        raise CheckpointReadError(
            f"checkpoint part {path} cannot be looked at: {describe_os_error(exc)}; retry once "
            "it can"
        ) from None


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
