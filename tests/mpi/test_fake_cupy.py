"""The stand-in cupy of ``tests/mpi/fake_cupy`` fails where cupy does, or the device-bucket test
(``test_device_buckets.py``) passes code that breaks on a GPU: a device array made a numpy
array implicitly (``np.asarray``, ``host[...] = device``: cupy's TypeError) or mixed with one.

It was a numpy subclass, which numpy converts without asking: ``bcast_in_place`` turned into
``np.array(array)`` (no ``to_host``) trained on the stand-in and raised on cupy.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import fake_cupy


@pytest.fixture
def fake():
    """The stand-in, loaded under a name of its own: a real cupy stays where it is."""
    return fake_cupy("_fake_cupy_under_test")


@pytest.mark.parametrize(
    "convert",
    [np.asarray, np.array, lambda d: np.zeros(3).__setitem__(Ellipsis, d)],
    ids=["asarray", "array", "host-setitem"],
)
def test_a_device_array_is_never_made_a_numpy_array_implicitly(fake, convert):
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array"):
        convert(fake.asarray(np.arange(3.0)))


@pytest.mark.parametrize(
    "mix",
    [
        lambda d, h: d + h,
        lambda d, h: np.copyto(h, d),
        lambda d, h: np.multiply(h, 2.0, out=d),
        lambda d, h: d.sum() * h,
        lambda d, h: d[0] + h,
    ],
    ids=["add", "copyto", "out", "reduction", "element"],
)
def test_a_device_array_never_meets_a_host_array(fake, mix):
    with pytest.raises(TypeError, match="Unsupported type"):
        mix(fake.asarray(np.arange(3.0)), np.zeros(3))


def test_only_get_and_set_cross_and_both_are_logged(fake):
    device, host = fake.asarray(np.arange(3.0)), np.zeros(3)
    device *= 2.0  # stays on the device
    assert isinstance(device, fake.ndarray) and isinstance(fake.sqrt(device), fake.ndarray)
    assert device.get(out=host) is host and host.tolist() == [0.0, 2.0, 4.0]
    device.set(np.ones(3))
    assert device.get().tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(TypeError):
        device.set(np.ones(3, np.float32))  # cupy: another dtype is refused
    assert [what for what, _, _ in fake.moves][:3] == ["get", "set", "get"]
