"""``Trainer.fit`` scans a data set for NaN and infinity once per array object, not at every
``fit`` (a memory-mapped set was read whole on every rank each time)."""

from __future__ import annotations

import numpy as np
import pytest

import distconv.arg
from distconv import Network, Trainer
from distconv.arg import not_finite_once
from distconv.data import DataError
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.optim import SGD
from distconv.sync.local import LocalSync
from tests.test_researcher_data import _data

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def scanned(monkeypatch) -> list[list[str]]:
    """The feeds each scan read, one list a call of :func:`distconv.arg.not_finite`."""
    calls: list[list[str]] = []
    scan = distconv.arg.not_finite

    def counted(arrays, dtype=None, **kwargs):
        calls.append(sorted(n for n, a in arrays.items() if a.dtype.kind == "f"))
        return scan(arrays, dtype, **kwargs)

    monkeypatch.setattr(distconv.arg, "not_finite", counted)
    return calls


def _memmapped(tmp_path, name: str, a: np.ndarray) -> np.memmap:
    """``a`` written to a file, mapped read-only, as ``np.load(..., mmap_mode="r")`` maps it."""
    np.save(tmp_path / f"{name}.npy", a)
    return np.load(tmp_path / f"{name}.npy", mmap_mode="r")


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _trainer() -> Trainer:
    net = Network()
    net.add("fc", FullyConnected(4, 3), "x")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    return Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=8, accuracy=None)


def test_fits_on_one_memory_mapped_set_scan_it_once_and_a_new_array_again(tmp_path, scanned):
    trainer = _trainer()
    train = _data()
    train["x"] = _memmapped(tmp_path, "x", train["x"])
    trainer.fit(train, epochs=1)
    trainer.fit(train, epochs=2)
    assert scanned[0] == ["x"] and all(feeds == [] for feeds in scanned[1:]), scanned
    bad = train["x"].copy()
    bad[5, 1] = np.inf
    with pytest.raises(DataError, match=r"^the training set's 'x' .* 1 row\(s\): row 5$"):
        trainer.fit({**train, "x": _memmapped(tmp_path, "bad", bad)}, epochs=3)


def test_another_array_at_a_freed_one_s_address_or_another_fed_type_is_scanned_again():
    """A cache by ``id`` alone took a new array allocated where a proved one was freed."""
    for _ in range(20):  # numpy's allocator hands the freed address back, mostly at once
        proved = _read_only(np.zeros((8, 3), np.float32))
        assert not_finite_once({"x": proved}) is None
        del proved
        fresh = np.zeros((8, 3), np.float32)
        fresh[2, 0] = np.nan
        fresh = _read_only(fresh)
        assert not_finite_once({"x": fresh}) == "'x' holds NaN or infinity in 1 row(s): row 2"
    wide = _read_only(np.full((4, 2), 1e5, np.float32))
    assert not_finite_once({"x": wide}) is None
    assert "as float16" in not_finite_once({"x": wide}, np.dtype(np.float16))
    assert not_finite_once({"x": wide.reshape(2, 4)}) is None  # a view: another object


@pytest.mark.parametrize("which", ["training", "test"])
def test_a_writable_set_written_in_place_between_fits_is_named_by_its_rows_before_a_step(
    which,
):
    """A buffer refilled between fits (the same object, shape and dtype) was not read again:
    the test set's NaN stopped the run after an epoch of training, by feed, not by rows."""
    train, test = _data(), _data(16)
    trainer = _trainer()
    trainer.fit(train, test, epochs=1)
    (train if which == "training" else test)["x"][3, 1] = np.nan
    before = trainer.network["fc"].weight.value.copy()
    with pytest.raises(DataError, match=rf"^the {which} set's 'x' .* 1 row\(s\): row 3$"):
        trainer.fit(train, test, epochs=2)
    np.testing.assert_array_equal(trainer.network["fc"].weight.value, before)  # no step ran


def test_a_read_only_view_of_a_writable_array_is_scanned_again():
    """Its values change with the array it views."""
    x = np.zeros((8, 3), np.float32)
    view = _read_only(x.view())
    assert not_finite_once({"x": view}) is None
    x[6, 2] = np.inf
    assert not_finite_once({"x": view}) == "'x' holds NaN or infinity in 1 row(s): row 6"


def test_an_array_made_writable_again_since_it_was_proved_finite_is_scanned_again():
    """A script that locked its set (``x.flags.writeable = False``) and unlocked it to refill
    it in place: the cache kept it proved, and the NaN written since went unread."""
    x = _read_only(np.zeros((8, 3), np.float32))
    assert not_finite_once({"x": x}) is None
    x.flags.writeable = True
    x[4, 1] = np.nan
    assert not_finite_once({"x": x}) == "'x' holds NaN or infinity in 1 row(s): row 4"


def test_a_locked_array_over_a_writable_buffer_is_scanned_again():
    """``np.frombuffer`` of a ``bytearray``, locked: the array is read-only, its buffer is not,
    and a NaN written through the buffer went unread at the next fit."""
    buffer = bytearray(8 * 3 * 4)
    flat = np.frombuffer(buffer, np.float32)
    flat.flags.writeable = False  # and every view of it: the buffer alone writes it
    x = flat.reshape(8, 3)
    assert not_finite_once({"x": x}) is None
    np.frombuffer(buffer, np.float32)[5 * 3 + 2] = np.nan  # the buffer's own writer
    assert not_finite_once({"x": x}) == "'x' holds NaN or infinity in 1 row(s): row 5"


def test_a_read_only_view_of_a_writable_buffer_is_scanned_again():
    """``memoryview(bytearray).toreadonly()`` is read-only, the bytearray under it is not: the
    walk asked the memoryview alone and remembered the array as proved finite."""
    buffer = bytearray(8 * 3 * 4)
    x = np.frombuffer(memoryview(buffer).toreadonly(), np.float32).reshape(8, 3)
    assert not_finite_once({"x": x}) is None
    np.frombuffer(buffer, np.float32)[5 * 3 + 2] = np.nan  # the buffer's own writer
    assert not_finite_once({"x": x}) == "'x' holds NaN or infinity in 1 row(s): row 5"
