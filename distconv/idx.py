"""IDX files, the format MNIST ships in: :func:`read_idx` (gzipped or not) and :func:`write_idx`.
:mod:`distconv.data` loads MNIST through them, and keeps their names."""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np

_IDX_UBYTE = 0x08  # IDX type code of unsigned bytes, the only one MNIST uses


def read_idx(path: str | os.PathLike, ndim: int | None = None) -> np.ndarray:
    """An IDX file of unsigned bytes (``.gz`` accepted) as a uint8 array.

    Raises:
        DataError: bad magic number, wrong number of dimensions, a size that does not match
            the header, or damaged gzip data (``PATH: damaged gzip data: CRC check failed ...``:
            an error of the data, the same on every attempt); or the file could not be read
            (``PATH: cannot read: ...``, raised from the OSError, which a later attempt may
            not meet: :func:`~distconv.rank_endings.named_in_ending`). The message names the
            file.
    """
    from distconv.data import DataError  # data.py loads MNIST through this module

    path = Path(path)
    damaged = None
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            raw = f.read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # damaged compressed data
        damaged = f"{path}: damaged gzip data: {exc}"
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc}") from None
    if damaged is not None:  # raised out here: a BadGzipFile is an OSError, and one as the
        raise DataError(damaged)  # context reads as a file that may read next time
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != _IDX_UBYTE:
        raise DataError(
            f"{path}: not an IDX file of unsigned bytes (magic number {raw[:4].hex() or 'missing'},"
            f" expected 000008xx)"
        )
    dims = raw[3]
    if ndim is not None and dims != ndim:
        raise DataError(f"{path}: expected {ndim} dimension(s), the header says {dims}")
    header = 4 + 4 * dims
    if len(raw) < header:
        raise DataError(f"{path}: truncated header ({len(raw)} bytes)")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", dims, 4))
    expected = header + math.prod(shape)  # exact: numpy's int64 product wraps past 2**63
    if len(raw) != expected:
        raise DataError(
            f"{path}: size {len(raw)} bytes does not match shape {shape} "
            f"({expected} bytes expected)"
        )
    return np.frombuffer(raw, np.uint8, offset=header).reshape(shape)


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write a uint8 array as an IDX file (gzipped when ``path`` ends in ``.gz``)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, _IDX_UBYTE, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(header + array.tobytes())
