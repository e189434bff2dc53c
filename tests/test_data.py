"""Data sets: digits, MNIST IDX files, splits, deterministic sharded batches, validation."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from distconv.data import (
    DataError,
    Dataset,
    batches,
    fingerprint,
    load_dataset,
    load_digits,
    load_mnist,
    num_batches,
    read_idx,
    split,
    synthetic,
    write_idx,
)
from distconv.logs import error_line
from distconv.rank_endings import job_error_in
from tests.mnist_files import DAMAGES, damage_gzip, write_mnist

# -- digits ----------------------------------------------------------------------------------


def test_digits_shapes_ranges_and_stratified_split():
    train, test = load_digits(test_fraction=0.2, seed=0)
    assert len(train) + len(test) == 1797
    assert len(test) == 359  # round(0.2 * 1797)
    assert train.x.shape == (1438, 1, 8, 8) and train.x.dtype == np.float32
    assert train.y.dtype == np.int64 and test.num_classes == 10
    assert train.x.min() == 0.0 and train.x.max() == 1.0
    # stratified: each class is ~20% test
    frac = np.bincount(test.y, minlength=10) / (
        np.bincount(test.y, minlength=10) + np.bincount(train.y, minlength=10)
    )
    np.testing.assert_allclose(frac, 0.2, atol=0.006)  # one example of ~180


def test_digits_split_is_seeded_and_disjoint():
    a_train, a_test = load_digits(seed=3)
    b_train, b_test = load_digits(seed=3)
    c_train, c_test = load_digits(seed=4)
    np.testing.assert_array_equal(a_test.x, b_test.x)
    assert not np.array_equal(a_test.x, c_test.x)
    # no image of the test set appears in the training set
    rows = {r.tobytes() for r in a_train.x.reshape(len(a_train), -1)}
    dup = sum(r.tobytes() in rows for r in a_test.x.reshape(len(a_test), -1))
    assert dup <= 2  # digits holds a couple of genuinely identical images


# -- MNIST IDX files -------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_reads_raw_and_gzip(tmp_path, gz):
    data = write_mnist(tmp_path, gz=gz)
    train, test = load_mnist(tmp_path)
    assert train.x.shape == (6, 1, 28, 28) and test.x.shape == (4, 1, 28, 28)
    np.testing.assert_array_equal(train.x[:, 0] * 255, data["train"][0].astype(np.float32))
    np.testing.assert_array_equal(test.y, data["t10k"][1])
    assert train.x.dtype == np.float32 and train.y.dtype == np.int64


def test_mnist_missing_directory_and_file(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_mnist(tmp_path / "nope")
    write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    msg = r"no t10k-labels-idx1-ubyte\[\.gz\], t10k-labels\.idx1-ubyte\[\.gz\] in it"
    with pytest.raises(DataError, match=msg):
        load_mnist(tmp_path)


def test_mnist_bad_magic_names_the_file(tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte"
    raw = bytearray(path.read_bytes())
    raw[2] = 0x0D  # float instead of unsigned byte
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte: not an IDX file.*00000d03"):
        load_mnist(tmp_path)


def test_mnist_wrong_rank_truncated_and_mismatched(tmp_path):
    write_mnist(tmp_path)
    labels = tmp_path / "train-labels-idx1-ubyte"
    images = tmp_path / "train-images-idx3-ubyte"

    write_idx(labels, np.zeros((6, 2), np.uint8))
    with pytest.raises(DataError, match="train-labels-idx1-ubyte: expected 1 dimension"):
        load_mnist(tmp_path)

    write_idx(labels, np.zeros(5, np.uint8))
    with pytest.raises(DataError, match="holds 6 images but train-labels-idx1-ubyte holds 5"):
        load_mnist(tmp_path)

    write_idx(labels, np.zeros(6, np.uint8))
    images.write_bytes(images.read_bytes()[:-10])
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte: size 4710 bytes .*4720"):
        load_mnist(tmp_path)


def test_mnist_corrupt_gzip_and_bad_labels(tmp_path):
    write_mnist(tmp_path, gz=True)
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(DataError, match="t10k-images-idx3-ubyte.gz: damaged gzip data"):
        load_mnist(tmp_path)
    write_mnist(tmp_path, gz=True)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.full(4, 12, np.uint8))
    # the file, not "mnist test" alone: the directory holds two label files, maybe gzipped
    msg = r"mnist test \(.*/t10k-labels-idx1-ubyte.gz\): labels must lie in \[0, 10\), got \[12"
    with pytest.raises(DataError, match=msg):
        load_mnist(tmp_path)


def test_mnist_damaged_compressed_data_is_a_data_error(tmp_path):
    write_mnist(tmp_path, gz=True)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    raw = bytearray(path.read_bytes())
    for i in range(20, len(raw) - 20, 7):  # damage the deflate stream, keep header and trailer
        raw[i] ^= 0x5A
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte.gz: damaged gzip data"):
        load_mnist(tmp_path)


@pytest.mark.parametrize("how", list(DAMAGES))
def test_a_damaged_gzip_file_is_an_error_of_the_job_s_data(tmp_path, how):
    """Its magic number, its CRC or its end lost: no attempt reads it again, so it is a
    DataError of the data's (named in the ending; the launcher restarts none), naming the
    file and gzip's cause; not one of a file that could not be read now (its OSError)."""
    write_mnist(tmp_path, gz=True)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    damage_gzip(path, how)
    with pytest.raises(DataError) as raised:
        load_mnist(tmp_path)
    assert str(raised.value).startswith(f"{path}: damaged gzip data: {DAMAGES[how]}"), raised
    said = f"x.py: error: DataError: {raised.value}"
    assert error_line("x.py", raised.value, "text") == said
    assert job_error_in([said]) == ("DataError", str(raised.value))


def test_a_gzip_file_that_cannot_be_read_is_no_error_of_the_data(tmp_path):
    """A folder in its place stands for an EIO of a network file system: it may read on the
    next attempt, and its ending names no class (the launcher restarts it)."""
    (tmp_path / "a.gz").mkdir()
    with pytest.raises(DataError, match=r"a.gz: cannot read: \[Errno 21\]") as raised:
        read_idx(tmp_path / "a.gz")
    assert error_line("x.py", raised.value, "text") == f"x.py: error: {raised.value}"


def test_mnist_data_dir_that_is_a_file(tmp_path):
    afile = tmp_path / "mnist.tar"
    afile.write_bytes(b"not a directory")
    with pytest.raises(DataError, match=r"mnist.tar is not a directory \(it is a file\)"):
        load_dataset("mnist", afile)


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_mnist_dir_is_refused_not_read_as_the_working_directory(
    tmp_path, monkeypatch, empty
):
    """Path("") is ".": a load_dataset("mnist", os.environ.get("MNIST", "")) trained on
    whatever MNIST files the working directory held (the CLI refused it)."""
    write_mnist(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="MNIST directory must not be empty"):
        load_dataset("mnist", empty)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_accepts_the_dotted_spelling(tmp_path, gz):
    data = write_mnist(tmp_path, gz=gz, sep=".")
    assert (tmp_path / f"train-images.idx3-ubyte{'.gz' if gz else ''}").is_file()
    train, test = load_mnist(tmp_path)
    np.testing.assert_array_equal(test.y, data["t10k"][1])
    assert len(train) == 6


def test_mnist_empty_test_set_is_refused_before_training(tmp_path):
    write_mnist(tmp_path, n_test=0)
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte: the MNIST test set holds no"):
        load_mnist(tmp_path)


def test_mnist_test_images_of_another_size_name_both_files(tmp_path):
    write_mnist(tmp_path, test_size=20)
    msg = (
        r"t10k-images-idx3-ubyte holds 20x20 images but train-images-idx3-ubyte holds 28x28 "
        r"\(in .*\); both sets must have the same image size"
    )
    with pytest.raises(DataError, match=msg):
        load_mnist(tmp_path)


def test_read_idx_roundtrip_any_rank(tmp_path):
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a.gz", a)
    np.testing.assert_array_equal(read_idx(tmp_path / "a.gz"), a)
    with gzip.open(tmp_path / "a.gz") as f:
        assert f.read(4) == b"\x00\x00\x08\x03"


def test_a_header_of_huge_dimensions_is_refused_with_their_true_size(tmp_path):
    """The size was numpy's product of the dimensions, in int64, which wraps: a header written
    little-endian (60000 x 28 x 28 reads as 1625948160 x 469762048 x 469762048) wanted "16
    bytes", and dimensions whose product wraps to 0 raised numpy's reshape error, no DataError.
    """
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(bytes([0, 0, 8, 3]) + np.asarray([60000, 28, 28], "<u4").tobytes() + b"x")
    want = 16 + 1625948160 * 469762048 * 469762048
    with pytest.raises(DataError, match=rf"size 17 bytes .*\({want} bytes expected\)"):
        read_idx(path)
    path.write_bytes(bytes([0, 0, 8, 3]) + np.asarray([2**21, 2**21, 2**22], ">u4").tobytes())
    with pytest.raises(DataError, match=rf"size 16 bytes .*\({16 + 2**64} bytes expected\)"):
        read_idx(path)


# -- validation ------------------------------------------------------------------------------


def test_nan_data_is_rejected_with_a_count():
    x = np.zeros((5, 1, 2, 2), np.float32)
    x[1, 0, 0, 0] = np.nan
    x[3, 0, 1, 1] = np.inf
    with pytest.raises(DataError, match="mine: images hold 2 NaN or infinite values"):
        Dataset(x, np.zeros(5, np.int64), 2, "mine")


def test_bfloat16_images_are_float_images_and_int4_ones_are_not():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.zeros((3, 1, 2, 2), ml_dtypes.bfloat16)
    x[2, 0, 1, 1] = np.nan
    with pytest.raises(DataError, match="mine: images hold 1 NaN or infinite values"):
        Dataset(x, np.zeros(3, np.int64), 2, "mine")  # checked as floats, not refused as such
    x[2, 0, 1, 1] = 1
    assert Dataset(x, np.zeros(3, np.int64), 2).x.dtype == ml_dtypes.bfloat16
    with pytest.raises(DataError, match="images must be float NCHW, got int4"):
        Dataset(np.zeros((3, 1, 2, 2), ml_dtypes.int4), np.zeros(3, np.int64))


def test_dataset_checks_shapes_and_labels():
    x = np.zeros((3, 1, 2, 2), np.float32)
    with pytest.raises(DataError, match=r"labels must be integers of shape \(3,\)"):
        Dataset(x, np.zeros(2, np.int64))
    with pytest.raises(DataError, match="float NCHW"):
        Dataset(x[:, 0], np.zeros(3, np.int64))
    with pytest.raises(DataError, match=r"labels must lie in \[0, 2\), got \[0, 5\]"):
        Dataset(x, np.array([0, 1, 5]), 2)
    assert Dataset(x, np.array([0, 3, 1])).num_classes == 4


# -- batches ---------------------------------------------------------------------------------


def _ids(n):
    """A data set whose single pixel is the example's index, to see which examples a batch has."""
    x = np.arange(n, dtype=np.float32).reshape(n, 1, 1, 1)
    return Dataset(x, np.arange(n) % 3, 3)


def _seen(dataset, **kw):
    return np.concatenate([xb.ravel() for xb, _ in batches(dataset, **kw)]).astype(int)


def test_batches_cover_the_epoch_once_in_shuffled_order():
    ds = _ids(10)
    got = [xb.ravel().astype(int) for xb, _ in batches(ds, 4, seed=1, epoch=0)]
    assert [len(b) for b in got] == [4, 4, 2]
    order = np.concatenate(got)
    assert sorted(order) == list(range(10)) and list(order) != list(range(10))
    assert num_batches(10, 4) == 3 and num_batches(10, 4, drop_last=True) == 2
    assert len(list(batches(ds, 4, drop_last=True))) == 2


def test_labels_travel_with_images():
    ds = _ids(20)
    for xb, yb in batches(ds, 6, seed=5, epoch=2):
        np.testing.assert_array_equal(yb, xb.ravel().astype(int) % 3)


def test_shuffle_depends_only_on_seed_and_epoch():
    ds = _ids(50)
    a = _seen(ds, batch_size=7, seed=3, epoch=4)
    # a fresh process state, other epochs drawn in between: the same order
    list(batches(ds, 7, seed=3, epoch=1))
    np.testing.assert_array_equal(_seen(ds, batch_size=7, seed=3, epoch=4), a)
    assert not np.array_equal(_seen(ds, batch_size=7, seed=3, epoch=5), a)
    assert not np.array_equal(_seen(ds, batch_size=7, seed=4, epoch=4), a)
    # the batch size cuts the same sequence differently, it does not change it
    np.testing.assert_array_equal(_seen(ds, batch_size=50, seed=3, epoch=4), a)


def test_shards_are_disjoint_equal_and_cover_all_but_the_remainder():
    ds = _ids(23)
    world = 4
    shards = [_seen(ds, batch_size=2, seed=0, epoch=1, shard=(r, world)) for r in range(world)]
    assert [len(s) for s in shards] == [5] * world  # 23 // 4
    union = np.concatenate(shards)
    assert len(set(union)) == 20
    assert num_batches(23, 2, world) == 3
    # the left-over examples change with the epoch
    other = np.concatenate(
        [_seen(ds, batch_size=2, seed=0, epoch=2, shard=(r, world)) for r in range(world)]
    )
    assert set(range(23)) - set(union) != set(range(23)) - set(other)


def test_unshuffled_batches_keep_order_and_bad_arguments():
    ds = _ids(5)
    np.testing.assert_array_equal(_seen(ds, batch_size=2, shuffle=False), np.arange(5))
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        list(batches(ds, 0))
    with pytest.raises(ValueError, match=r"0 <= rank < world_size, got \(2, 2\)"):
        list(batches(ds, 1, shard=(2, 2)))
    with pytest.raises(ValueError, match="5 examples cannot be shared among 8 workers"):
        list(batches(ds, 1, shard=(0, 8)))


# -- synthetic and splits --------------------------------------------------------------------


@pytest.mark.parametrize(
    "classes, said", [(2.5, r"2\.5"), (True, "True"), ("4", "'4'"), (None, "None")]
)
def test_a_class_count_that_is_not_an_int_is_refused_naming_it(classes, said):
    """Dataset kept num_classes=2.5 without a word (a model of 2.5 classes failed later), read
    True as a count of one ("labels must lie in [0, True)"), and failed on "4" and None with
    "'<=' not supported between instances of 'str' and 'int'", naming nothing."""
    x, y = np.zeros((3, 1, 1, 1), np.float32), np.array([0, 1, 1])
    with pytest.raises(
        DataError, match=rf"^labelled: num_classes must be an int \(0 infers it\), got {said}$"
    ):
        Dataset(x, y, classes, "labelled")
    assert Dataset(x, y, np.int64(3)).num_classes == 3 and Dataset(x, y).num_classes == 2


def test_synthetic_is_seeded_balanced_and_separable():
    a, b = synthetic(n=200, seed=1), synthetic(n=200, seed=1)
    np.testing.assert_array_equal(a.x, b.x)
    assert np.bincount(a.y).tolist() == [50, 50, 50, 50]
    assert 0.0 <= a.x.min() and a.x.max() <= 1.0
    # the nearest class mean classifies it almost perfectly: it is learnable
    flat = a.x.reshape(len(a), -1)
    means = np.stack([flat[a.y == c].mean(0) for c in range(4)])
    pred = ((flat[:, None] - means[None]) ** 2).sum(-1).argmin(1)
    assert (pred == a.y).mean() > 0.95


def test_split_fractions_and_bad_fraction():
    train, test = split(synthetic(n=100), 0.25, seed=0)
    assert (len(train), len(test)) == (75, 25)
    per_class = np.bincount(test.y)
    assert per_class.sum() == 25 and per_class.max() - per_class.min() <= 1
    with pytest.raises(ValueError, match="test_fraction"):
        split(synthetic(n=10), 1.0, seed=0)


@pytest.mark.parametrize("seed, said", [(-1, "-1"), (1.5, r"1\.5"), (True, "True")])
def test_a_seed_numpy_cannot_take_is_refused_by_the_data_sets_naming_it(seed, said):
    """split() and synthetic() handed their seed to numpy as it was: -1 failed with "expected
    non-negative integer", 1.5 with "SeedSequence expects int or sequence of ints", naming no
    seed, and True drew the split of seed 1 without a word; the sampler refuses all three by
    check_seed."""
    data = synthetic(n=20)
    refused = r"seed must be an int >= 0 \(the {}\), got " + said
    with pytest.raises(ValueError, match=refused.format("split's")):
        split(data, 0.25, seed)
    with pytest.raises(ValueError, match=refused.format("synthetic data's")):
        synthetic(n=20, seed=seed)
    with pytest.raises(ValueError, match=refused.format("split's")):
        load_digits(seed=seed)


@pytest.mark.parametrize(
    "make",
    [np.random.default_rng, np.random.SeedSequence, np.random.PCG64, lambda s: None],
    ids=["Generator", "SeedSequence", "BitGenerator", "None"],
)
def test_the_data_sets_take_numpy_s_own_seeds_as_before(make):
    """split() and synthetic() handed their seed to numpy's default_rng, which takes a
    Generator, a BitGenerator, a SeedSequence and None (fresh entropy); the seed check made
    for -1, 1.5 and True refused all four as "seed must be an int >= 0"."""
    data = synthetic(n=20)
    train, test = split(data, 0.25, make(5))
    assert (len(train), len(test)) == (15, 5)
    assert len(synthetic(n=20, seed=make(5))) == 20
    if make(5) is not None:  # the same seed draws the same split and set as numpy's generator
        expected = split(data, 0.25, np.random.default_rng(make(5)))[1]
        np.testing.assert_array_equal(split(data, 0.25, make(5))[1].x, expected.x)
        again = synthetic(n=20, seed=np.random.default_rng(make(5)))
        np.testing.assert_array_equal(synthetic(n=20, seed=make(5)).x, again.x)


@pytest.mark.parametrize("words", [[5, 1], (5, 1), [0]])
def test_the_data_sets_take_a_list_of_seed_words_as_numpy_does(words):
    """numpy's default_rng takes a sequence of ints (``[seed, rank]``), which split() and
    synthetic() handed it before the seed checks came; those checks refused it (found in
    review of 37a310b). The words are checked one by one: [5, -1] is refused, naming -1."""
    data = synthetic(n=20)
    expected = split(data, 0.25, np.random.default_rng(list(words)))[1]
    np.testing.assert_array_equal(split(data, 0.25, words)[1].x, expected.x)
    again = synthetic(n=20, seed=np.random.default_rng(list(words)))
    np.testing.assert_array_equal(synthetic(n=20, seed=words).x, again.x)
    with pytest.raises(ValueError, match=r"seed must be an int >= 0 \(the split's\), got -1"):
        split(data, 0.25, [5, -1])


@pytest.mark.parametrize("dtype", [np.int64, np.uint32, np.uint64])
def test_the_data_sets_take_an_array_of_seed_words_as_numpy_does(dtype):
    """numpy's default_rng takes an array of ints as it takes their list (its array_like of
    words, as ``np.array([seed, rank])``), which fd8b8d8 still refused ("seed must be an int
    >= 0 ..., got array([5, 1])"). Its words are checked as a list's: -1 is refused, named."""
    data, words = synthetic(n=20), np.array([5, 1], dtype=dtype)
    expected = split(data, 0.25, np.random.default_rng([5, 1]))[1]
    np.testing.assert_array_equal(split(data, 0.25, words)[1].x, expected.x)
    again = synthetic(n=20, seed=np.random.default_rng([5, 1]))
    np.testing.assert_array_equal(synthetic(n=20, seed=words).x, again.x)
    with pytest.raises(ValueError, match=r"seed must be an int >= 0 \(the split's\), got -1$"):
        split(data, 0.25, np.array([5, -1]))
    with pytest.raises(ValueError, match=r"seed must be an int >= 0 \(the split's\), got 1.5$"):
        split(data, 0.25, np.array([1.5]))


def test_load_dataset_by_name(tmp_path):
    train, test = load_dataset("synthetic", seed=0)
    assert len(train) + len(test) == 512
    with pytest.raises(DataError, match="unknown data set 'cifar'"):
        load_dataset("cifar")
    with pytest.raises(DataError, match="needs a directory"):
        load_dataset("mnist")


@pytest.mark.parametrize("name", ["digits", "synthetic"])
def test_a_data_dir_for_a_set_that_reads_none_is_refused(tmp_path, name):
    """``--data-dir ~/mnist`` without ``--data mnist`` trained on the digits without a word."""
    with pytest.raises(DataError, match=f"--data-dir is read for --data mnist only, not {name}"):
        load_dataset(name, tmp_path)


# -- fingerprints (what the job check compares of each rank's data) ----------------------------


def test_a_fingerprint_tells_apart_the_sets_ranks_could_be_handed_by_mistake():
    rng = np.random.default_rng(0)
    whole = {"image": rng.random((64, 1, 8, 8), dtype=np.float32), "label": np.arange(64)}
    ours = fingerprint(whole)
    assert ours == fingerprint({k: a.copy() for k, a in whole.items()})  # a copy: the same
    assert ours["examples"] == 64
    assert ours["feeds"] == {"image": [[1, 8, 8], "float32"], "label": [[], "int64"]}
    last_label_changed = np.where(np.arange(64) == 63, 0, whole["label"])
    others = {
        "its own shard": {k: a[1::2] for k, a in whole.items()},
        "a shard as long": {k: np.concatenate([a[32:], a[32:]]) for k, a in whole.items()},
        "the examples in another order": {k: a[::-1] for k, a in whole.items()},
        "another dtype": {**whole, "image": whole["image"].astype(np.float64)},
        "another image shape": {**whole, "image": whole["image"].reshape(64, 1, 4, 16)},
        "another feed": {**whole, "weight": np.ones(64)},
        "a sampled label changed": {**whole, "label": last_label_changed},
    }
    for what, arrays in others.items():
        assert fingerprint(arrays) != ours, what


def test_a_fingerprint_reads_a_few_examples_not_the_set():
    """Its limit, as documented: an example between the sampled ones is not read."""
    labels = np.arange(64)
    changed = labels.copy()
    changed[5] = 99  # rows 0, 9, 18, ... are read
    assert fingerprint({"label": labels}) == fingerprint({"label": changed})
    assert fingerprint({"label": labels[:0]})["examples"] == 0  # an empty set has one too


def test_a_fingerprint_of_object_arrays_reads_their_values_not_their_addresses():
    """A feed of Python objects (pandas' ``to_numpy()`` of a mixed frame) trains once the
    Trainer casts it (``dtype=``). Its bytes were the objects' addresses, other in every process
    and for every copy: two ranks handed the same set were told they run different jobs."""
    values = np.random.default_rng(0).standard_normal((16, 3))
    ours = fingerprint({"x": values.astype(object)})
    assert ours == fingerprint({"x": values.copy().astype(object)})  # other objects, same values
    assert ours != fingerprint({"x": (values + 1).astype(object)})
    names = np.array([f"item {i}" for i in range(16)], dtype=object)
    assert fingerprint({"x": names}) == fingerprint({"x": np.array(names.tolist(), dtype=object)})


@pytest.mark.parametrize(
    "images, labels, said",
    [
        ("list", "array", r"mine: images must be float NCHW, got list"),
        ("array", "list", r"mine: labels must be integers of shape \(4,\), got list"),
    ],
)
def test_a_data_set_of_lists_is_refused_naming_what_they_are(images, labels, said):
    """Dataset(list_of_images, labels) raised "'list' object has no attribute 'ndim'",
    naming neither the data set nor which of its arrays."""
    x = np.zeros((4, 1, 2, 2), np.float32)
    y = np.arange(4) % 2
    x = list(x) if images == "list" else x
    y = list(y) if labels == "list" else y
    with pytest.raises(DataError, match=said):
        Dataset(x, y, 2, "mine")


def test_the_batches_of_a_loop_of_ones_own_are_still_importable_from_data():
    from distconv import data, sampler

    assert (data.batches, data.num_batches, data.shard_indices) == (
        sampler.batches,
        sampler.num_batches,
        sampler.shard_indices,
    )


def test_torch_tensors_for_feeds_are_refused_saying_how_to_hand_them():
    """A torch tensor has a dtype and a shape, so it passed as an array, and the fit failed in
    its job check with "'torch.dtype' object has no attribute 'kind'"."""
    torch = pytest.importorskip("torch")
    from distconv.data import as_arrays

    x, y = torch.rand(8, 1, 2, 2), torch.arange(8) % 2
    said = r"feed 'image' holds Tensor, not an array \(numpy or cupy; a torch tensor as t\.numpy"
    with pytest.raises(TypeError, match=said):
        as_arrays({"image": x, "label": y.numpy()})
    assert as_arrays({"image": x.numpy(), "label": y.numpy()})["label"].dtype == np.int64
