"""Data sets: what they hold, where they come from, and what the job check compares of them.

Images are float32 NCHW in [0, 1] on the host, labels int64. Three sources: scikit-learn's bundled
handwritten digits (8x8, no download), MNIST from its four IDX files, and a synthetic set for
tests. The batches each worker trains on are :mod:`distconv.sampler`'s.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from distconv.arg import NOT_FINITE_CHUNK_BYTES, as_fed, not_finite_once
from distconv.backend import ARRAY_KINDS, is_array, is_float_dtype, to_host
from distconv.idx import read_idx, write_idx  # noqa: F401 - their names here, as before
from distconv.kernels.shape import is_int
from distconv.names import DATASET_NAMES
from distconv.sampler import batches, check_seed, num_batches, shard_indices  # noqa: F401

DATASETS = DATASET_NAMES  # the names live apart, for the command line (distconv.names)
#: examples a data set's fingerprint reads, spread evenly over it (:func:`fingerprint`)
FINGERPRINT_ROWS = 8


class DataError(ValueError):
    """Unreadable, malformed or non-finite data; the message names the file or the array."""


@dataclass(frozen=True)
class Dataset:
    """Images and their labels, checked on construction.

    Args:
        x: float images, shape (N, C, H, W).
        y: integer labels in ``[0, num_classes)``, shape (N,).
        num_classes: number of classes; inferred as ``max(y) + 1`` when omitted.
        name: what error messages call this data set.

    Raises:
        DataError: images or labels that are not numpy arrays (a list), mismatched lengths, a
            wrong rank or dtype, NaN or infinity in ``x``, a label out of range, or a
            ``num_classes`` that is not an int (a bool neither).
    """

    x: np.ndarray
    y: np.ndarray
    num_classes: int = 0
    name: str = "dataset"

    def __post_init__(self) -> None:
        x, y = self.x, self.y  # a list: "'list' object has no attribute 'ndim'", unnamed
        if not isinstance(x, np.ndarray) or x.ndim != 4 or not is_float_dtype(x.dtype):
            raise DataError(f"{self.name}: images must be float NCHW, got {_kind(x)}")
        if (
            not isinstance(y, np.ndarray)
            or y.ndim != 1
            or y.dtype.kind not in "iu"
            or len(y) != len(x)
        ):
            raise DataError(
                f"{self.name}: labels must be integers of shape ({len(x)},), got {_kind(y)}"
            )
        if not is_int(self.num_classes):  # 2.5 was kept, None and "4" failed comparing to 0
            raise DataError(
                f"{self.name}: num_classes must be an int (0 infers it), got {self.num_classes!r}"
            )
        if (where := _not_finite(x)) is not None:
            raise DataError(f"{self.name}: images hold {where}")
        if self.num_classes <= 0:
            object.__setattr__(self, "num_classes", int(y.max()) + 1 if len(y) else 0)
        if len(y) and (y.min() < 0 or y.max() >= self.num_classes):
            raise DataError(
                f"{self.name}: labels must lie in [0, {self.num_classes}), "
                f"got [{y.min()}, {y.max()}]"
            )

    def __len__(self) -> int:
        return len(self.y)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of one image."""
        return tuple(self.x.shape[1:])

    def subset(self, index: np.ndarray, name: str | None = None) -> Dataset:
        """The examples at ``index`` (an index array or a boolean mask), as a new data set."""
        return Dataset(self.x[index], self.y[index], self.num_classes, name or self.name)


def _not_finite(x: np.ndarray) -> str | None:
    """How many NaN or infinite values ``x`` holds and in which rows, or None, read a chunk at a
    time as fit reads its sets (:func:`~distconv.arg.not_finite_once`, which then skips a
    read-only ``x``): a mask of the whole array was a byte per value at once."""
    where = not_finite_once({"x": x})
    if where is None:
        return None
    rows = max(1, NOT_FINITE_CHUNK_BYTES // max(1, x[:1].nbytes))
    count = sum(
        int(np.count_nonzero(~np.isfinite(x[i : i + rows]))) for i in range(0, len(x), rows)
    )
    # not_finite's "'x' holds NaN or infinity in 2 row(s): rows 3, 9": its rows
    return f"{count} NaN or infinite values{where.partition(' holds NaN or infinity')[2]}"


def _kind(a: object) -> str:
    return f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__


# -- splits ------------------------------------------------------------------------------------


def split(dataset: Dataset, test_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """A stratified, seeded split into (train, test).

    The test set gets ``round(test_fraction * N)`` examples, each class within one of its share,
    chosen by a permutation drawn from ``seed``.

    Raises:
        ValueError: ``test_fraction`` is not in (0, 1), or ``seed`` is neither an int >= 0 nor
            one of :data:`NUMPY_SEEDS` (numpy's own message named no seed, and True drew seed
            1's split).
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    n = len(dataset)
    perm = _generator(seed, "the split's").permutation(n)
    # A stable sort of the shuffled labels groups each class in shuffled order. An example's
    # rank within its class, over the class size, spreads every class evenly over [0, 1); the
    # lowest positions overall form the test set, which keeps proportions and the exact total.
    order = perm[np.argsort(dataset.y[perm], kind="stable")]
    counts = np.bincount(dataset.y, minlength=dataset.num_classes)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    labels = dataset.y[order]
    position = (np.arange(n) - starts[labels] + 0.5) / counts[labels]
    in_test = np.zeros(n, dtype=bool)
    in_test[order[np.argsort(position, kind="stable")[: round(test_fraction * n)]]] = True
    return (
        dataset.subset(~in_test, f"{dataset.name} train"),
        dataset.subset(in_test, f"{dataset.name} test"),
    )


#: the seeds numpy's generators take as they are (None: fresh entropy from the system)
NUMPY_SEEDS = (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence, type(None))


def _generator(seed: Any, whose: str) -> np.random.Generator:
    """numpy's generator of ``seed``: one of :data:`NUMPY_SEEDS`, used as numpy uses it, or an
    int (or a non-empty list, tuple or 1-D array of them, numpy's entropy words) checked by
    :func:`~distconv.sampler.check_seed` (numpy named no seed for -1 or 1.5, and took True for
    1), which refuses the rest, naming ``whose`` seed it is."""
    if isinstance(seed, np.ndarray) and seed.ndim == 1:
        seed = seed.tolist()  # numpy seeds an array of words as their list: checked as one
    if isinstance(seed, (list, tuple)) and seed:  # numpy's entropy words ([seed, rank])
        for word in seed:
            check_seed(word, whose)
    elif not isinstance(seed, NUMPY_SEEDS):
        check_seed(seed, whose)
    return np.random.default_rng(seed)


# -- sources ---------------------------------------------------------------------------------


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> tuple[Dataset, Dataset]:
    """scikit-learn's 1797 handwritten digits as (train, test), images (N, 1, 8, 8) in [0, 1].

    The data ship with scikit-learn; nothing is downloaded. The split is stratified by class
    and seeded.
    """
    from sklearn.datasets import load_digits as sk_load_digits  # heavy; only when asked for

    raw = sk_load_digits()
    x = (raw.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)  # pixel values are 0..16
    full = Dataset(x, raw.target.astype(np.int64), 10, "digits")
    return split(full, test_fraction, seed)


MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def load_mnist(directory: str | os.PathLike) -> tuple[Dataset, Dataset]:
    """MNIST as (train, test) from the four IDX files in ``directory``, gzipped or not.

    Images become (N, 1, 28, 28) float32 in [0, 1]. Files may be named as on the MNIST page
    (``train-images-idx3-ubyte``) or with a dot before ``idx`` (``train-images.idx3-ubyte``), a
    common variant. Both sets are checked before anything trains: neither may be empty, and the
    test images must have the training images' size.

    Raises:
        DataError: the directory or a file is missing, a file is not a valid IDX file of the
            expected kind or holds a label past 9, or the sets do not fit (named by the files).
    """
    directory = _directory(directory)
    parts, sources = [], []
    for split_name, (image_name, label_name) in MNIST_FILES.items():
        image_file, label_file = _find(directory, image_name), _find(directory, label_name)
        images, labels = read_idx(image_file, ndim=3), read_idx(label_file, ndim=1)
        if len(images) != len(labels):
            raise DataError(
                f"{directory}: {image_file.name} holds {len(images)} images but "
                f"{label_file.name} holds {len(labels)} labels"
            )
        if len(images) == 0:
            raise DataError(f"{image_file}: the MNIST {split_name} set holds no images")
        x = (images.astype(np.float32) / 255.0)[:, None]
        # named by its label file: the one check of Dataset's that can fail here is the labels'
        parts.append(Dataset(x, labels.astype(np.int64), 10, f"mnist {split_name} ({label_file})"))
        sources.append(image_file)
    (train, test), (train_file, test_file) = parts, sources
    if train.image_shape != test.image_shape:
        size = "x".join(map(str, train.image_shape[1:]))
        other = "x".join(map(str, test.image_shape[1:]))
        raise DataError(
            f"{test_file.name} holds {other} images but {train_file.name} holds {size} "
            f"(in {directory}); both sets must have the same image size"
        )
    return train, test


def _directory(directory: str | os.PathLike) -> Path:
    if not str(directory).strip():  # Path("") is ".": a directory nobody named
        raise DataError(f"MNIST directory must not be empty, got {str(directory)!r}")
    directory = Path(directory)
    if directory.is_dir():
        return directory
    if directory.exists():
        raise DataError(f"MNIST directory {directory} is not a directory (it is a file)")
    raise DataError(f"MNIST directory {directory} does not exist")


def _find(directory: Path, name: str) -> Path:
    stem, _, kind = name.rpartition("-idx")
    spellings = (name, f"{stem}.idx{kind}")  # train-images-idx3-ubyte, train-images.idx3-ubyte
    for spelling in spellings:
        for candidate in (directory / spelling, directory / f"{spelling}.gz"):
            if candidate.is_file():
                return candidate
    tried = ", ".join(f"{n}[.gz]" for n in spellings)
    raise DataError(f"{directory}: no {tried} in it")


def synthetic(
    n: int = 512,
    image_shape: tuple[int, int, int] = (1, 8, 8),
    num_classes: int = 4,
    noise: float = 0.3,
    seed: int = 0,
) -> Dataset:
    """A learnable data set for tests: each class is a fixed random pattern plus noise.

    Labels cycle through the classes, so every class has ``n // num_classes`` or one more
    example. Values are clipped to [0, 1] like real images.

    Raises:
        ValueError: ``seed`` is neither an int >= 0 nor one of :data:`NUMPY_SEEDS` (as
            :func:`split` refuses it).
    """
    rng = _generator(seed, "the synthetic data's")
    patterns = rng.random((num_classes, *image_shape))
    y = np.arange(n, dtype=np.int64) % num_classes
    x = patterns[y] + noise * rng.standard_normal((n, *image_shape))
    return Dataset(np.clip(x, 0.0, 1.0).astype(np.float32), y, num_classes, "synthetic")


def load_dataset(
    name: str, data_dir: str | os.PathLike | None = None, seed: int = 0
) -> tuple[Dataset, Dataset]:
    """(train, test) for a data set named on the command line: digits, mnist or synthetic."""
    if data_dir is not None and name != "mnist":  # read by nothing: not the set that was meant
        raise DataError(f"--data-dir is read for --data mnist only, not {name}; add --data mnist")
    if name == "digits":
        return load_digits(seed=seed)
    if name == "mnist":
        if data_dir is None:
            raise DataError("the mnist data set needs a directory (--data-dir) with its IDX files")
        return load_mnist(data_dir)
    if name == "synthetic":
        return split(synthetic(seed=seed), 0.25, seed)
    raise DataError(f"unknown data set {name!r}; choose one of {list(DATASETS)}")


#: a data set as arrays by feed name, all with the same first dimension
Arrays = Mapping[str, np.ndarray]


def as_arrays(data: Arrays | Dataset, image: str = "image", label: str = "label") -> Arrays:
    """A data set as arrays by feed name (a :class:`Dataset` feeds ``image`` and ``label``).

    Raises:
        TypeError: ``data`` is neither, or holds something that is not a numpy or cupy array
            (a list, a torch tensor), with the names of the feeds it should hold.
    """
    if isinstance(data, Dataset):
        return {image: data.x, label: data.y}
    if not isinstance(data, Mapping):
        raise TypeError(
            f"a data set is a Dataset or a dict of arrays by feed name ({{'image': x, "
            f"'label': y}}), got {type(data).__name__}"
        )
    for name, a in data.items():
        if not is_array(a):  # a torch tensor failed in the job check, on its dtype's .kind
            raise TypeError(f"feed {name!r} holds {type(a).__name__}, not an array ({ARRAY_KINDS})")
    return data


def array_length(arrays: Arrays) -> int:
    """The common first dimension of a data set's arrays (a :class:`DataError` where none)."""
    lengths = {name: len(a) for name, a in arrays.items()}
    if not lengths or len(set(lengths.values())) != 1:
        raise DataError(f"a data set needs arrays of one common length, got {lengths}")
    return next(iter(lengths.values()))


def fingerprint(arrays: Any, dtype: Any = None) -> dict[str, Any]:
    """What the job check compares of a data set across ranks: its length, each feed's example
    shape and dtype, and a SHA-256 of :data:`FINGERPRINT_ROWS` examples spread over it, as the
    network gets them (cast to ``dtype``, the trainer's, as :func:`~distconv.arg.feeds_of`).

    Every rank is handed the whole set and takes its strided share. A rank handed another set,
    its own shard (as Horovod scripts do), another file, or the same examples in another order,
    would train on a part of the data, or on examples counted twice, without a word; with its
    fingerprint in the job check it is named at setup. Reads a few examples, not the set.
    A :class:`~distconv.sequence_set.SequenceSet` gives its own, with its offsets."""
    if not isinstance(arrays, Mapping):
        return arrays.fingerprint(dtype)
    n = array_length(arrays)
    rows = np.unique(np.linspace(0, max(n - 1, 0), min(n, FINGERPRINT_ROWS)).round().astype(int))
    digest, feeds = hashlib.sha256(), {}
    for name in sorted(arrays):
        sample = as_fed(to_host(arrays[name][rows]), dtype)
        # an object array's bytes are its elements' addresses, other in every process: its
        # values' text instead (numbers, strings), which every rank handed the same set shares
        data = repr(sample.tolist()).encode() if sample.dtype.hasobject else sample.tobytes()
        digest.update(data)
        feeds[name] = [list(arrays[name].shape[1:]), str(sample.dtype)]
    return {"examples": n, "feeds": feeds, "sampled_examples_sha256": digest.hexdigest()[:16]}


def data_facts(train: Any, test: Any | None, dtype: Any = None) -> dict[str, Any]:
    """The training and test sets' :func:`fingerprint` s, as entries of the job check."""
    return {
        "train_data": fingerprint(train, dtype),
        "test_data": None if test is None else fingerprint(test, dtype),
    }
