"""``Trainer.fit`` scans a data set for NaN and infinity once per array object, not at every
``fit`` (a memory-mapped set was read whole on every rank each time) (review k469)."""

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
    mapped = np.memmap(tmp_path / name, a.dtype, "w+", shape=a.shape)
    mapped[...] = a
    return mapped


def test_fits_on_one_memory_mapped_set_scan_it_once_and_a_new_array_again(tmp_path, scanned):
    net = Network()
    net.add("fc", FullyConnected(4, 3), "x")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    trainer = Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=8, accuracy=None)
    train = _data()
    train["x"] = _memmapped(tmp_path, "x", train["x"])
    trainer.fit(train, epochs=1)
    trainer.fit(train, epochs=2)
    assert scanned[0] == ["x"] and all(feeds == [] for feeds in scanned[1:]), scanned
    bad = train["x"].copy()
    bad[5, 1] = np.inf
    with pytest.raises(DataError, match=r"^the training set's 'x' .* 1 row\(s\): 5$"):
        trainer.fit({**train, "x": _memmapped(tmp_path, "bad", bad)}, epochs=3)


def test_another_array_at_a_freed_one_s_address_or_another_fed_type_is_scanned_again():
    """A cache by ``id`` alone took a new array allocated where a proved one was freed."""
    for _ in range(20):  # numpy's allocator hands the freed address back, mostly at once
        proved = np.zeros((8, 3), np.float32)
        assert not_finite_once({"x": proved}) is None
        del proved
        fresh = np.zeros((8, 3), np.float32)
        fresh[2, 0] = np.nan
        assert not_finite_once({"x": fresh}) == "'x' holds NaN or infinity in 1 row(s): 2"
    wide = np.full((4, 2), 1e5, np.float32)
    assert not_finite_once({"x": wide}) is None
    assert "as float16" in not_finite_once({"x": wide}, np.dtype(np.float16))
    assert not_finite_once({"x": wide.reshape(2, 4)}) is None  # a view: another object
