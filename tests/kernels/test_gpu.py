"""The cupy path: the same layers on the device, with cuDNN and with im2col, against numpy.

Skipped where cupy or a CUDA device is missing (CI has none); run them on a GPU machine with
``pytest -m gpu``.
"""

import numpy as np
import pytest

from distconv import Arg
from distconv.backend import BackendError, set_device, to_host
from distconv.layers import (
    Conv2D,
    Conv3D,
    ConvTranspose2D,
    ConvTranspose3D,
    FullyConnected,
    MaxPool2D,
)

pytestmark = pytest.mark.gpu


@pytest.fixture
def cupy():
    cp = pytest.importorskip("cupy", reason="cupy is not installed: GPU tests skipped")
    try:
        set_device("gpu")
    except BackendError as exc:
        pytest.skip(str(exc))
    yield cp
    set_device("cpu")


LAYERS = [
    lambda: Conv2D(4, 8, 3, padding=1, groups=2, act="relu", dtype=np.float64),
    lambda: Conv2D(4, 8, 3, stride=2, dilation=2, padding=2, dtype=np.float64),
    lambda: ConvTranspose2D(4, 8, 3, stride=2, padding=1, output_padding=1, dtype=np.float64),
    lambda: Conv3D(4, 4, 3, padding=1, dtype=np.float64),
    lambda: ConvTranspose3D(4, 4, 3, stride=2, padding=1, dtype=np.float64),
    lambda: FullyConnected(4 * 6 * 6, 5, act="softmax", dtype=np.float64),
    lambda: MaxPool2D(3, 2, 1),
]


@pytest.mark.parametrize("cudnn", ["1", "0"])
@pytest.mark.parametrize("make", LAYERS)
def test_device_matches_host(cupy, monkeypatch, rng, make, cudnn):
    monkeypatch.setenv("DISTCONV_CUDNN", cudnn)
    set_device("cpu")
    host = make()
    shape = (2, 4, 6, 6, 6) if "3D" in type(host).__name__ else (2, 4, 6, 6)
    x = rng.standard_normal(shape)
    set_device("gpu")
    dev = make()
    for p, q in zip(host.parameters(), dev.parameters()):
        q.value[...] = cupy.asarray(p.value)
    xa, xd = Arg(x), Arg(cupy.asarray(x))
    y = host(xa).value
    yd = dev(xd).value
    assert isinstance(yd, cupy.ndarray)
    np.testing.assert_allclose(to_host(yd), y, rtol=1e-10, atol=1e-10)
    dy = rng.standard_normal(y.shape)
    host.output.grad = dy
    dev.output.grad = cupy.asarray(dy)
    host.backward(lambda p: None)
    dev.backward(lambda p: None)
    np.testing.assert_allclose(to_host(xd.grad), xa.grad, rtol=1e-8, atol=1e-10)
    for p, q in zip(host.parameters(), dev.parameters()):
        np.testing.assert_allclose(to_host(q.grad), p.grad, rtol=1e-8, atol=1e-10)
