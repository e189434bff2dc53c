"""MNIST's four IDX files written for a test (:func:`write_mnist`), and a gzipped file damaged
as a copy cut short or a bit flipped on a disk damages it (:func:`damage_gzip`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distconv.data import write_idx

#: the ways :func:`damage_gzip` damages a file, and the error ``gzip`` raises reading it
DAMAGES = {
    "magic": "Not a gzipped file",  # gzip.BadGzipFile, an OSError
    "crc": "CRC check failed",  # gzip.BadGzipFile
    "truncated": "Compressed file ended before the end-of-stream marker was reached",  # EOFError
}


def write_mnist(
    directory: Path,
    n_train: int = 6,
    n_test: int = 4,
    gz: bool = False,
    test_size: int = 28,
    sep: str = "-",
    seed: int = 0,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """MNIST's training and test images and labels, random, in ``directory`` (gzipped where
    ``gz``; ``sep`` before ``idx``, ``.`` the common variant's); returned by set."""
    rng = np.random.default_rng(seed)
    suffix = ".gz" if gz else ""
    data = {}
    for prefix, n, size in (("train", n_train, 28), ("t10k", n_test, test_size)):
        images = rng.integers(0, 256, (n, size, size), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        write_idx(directory / f"{prefix}-images{sep}idx3-ubyte{suffix}", images)
        write_idx(directory / f"{prefix}-labels{sep}idx1-ubyte{suffix}", labels)
        data[prefix] = (images, labels)
    return data


def damage_gzip(path: Path, how: str) -> None:
    """Damage the gzipped file ``path`` as :data:`DAMAGES` names it: its magic number, its
    CRC (the trailer's first byte), or its second half cut off."""
    raw = bytearray(path.read_bytes())
    if how == "magic":
        raw[0] ^= 0xFF
    elif how == "crc":
        raw[-8] ^= 0xFF
    elif how == "truncated":
        del raw[len(raw) // 2 :]
    else:
        raise ValueError(f"no damage {how!r}; one of {list(DAMAGES)}")
    path.write_bytes(bytes(raw))
