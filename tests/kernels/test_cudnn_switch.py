"""``DISTCONV_CUDNN`` read as every ``DISTCONV_*`` switch is (``messages.env_switch``): only
``0`` turned cuDNN off, so ``DISTCONV_CUDNN=off`` or ``false`` kept it on without a word.

No CUDA device here: ``available`` (does this CuPy reach cuDNN) is taken as true, and the
arrays are host arrays, since ``usable`` reads nothing of them but their dtype. The last test
is of ``unavailable_reason`` where CuPy 13 finds no cuDNN 8."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.kernels import cudnn

pytestmark = pytest.mark.timeout(30)


#: a 2-D convolution's images and filters (cuDNN's tensors have at least 4 dimensions)
_IMAGES_AND_FILTERS = (np.zeros((1, 2, 4, 4), np.float32), np.zeros((3, 2, 3, 3), np.float32))


@pytest.fixture
def cudnn_present(monkeypatch):
    monkeypatch.setattr(cudnn, "available", lambda: True)


@pytest.mark.parametrize("value", ["0", "off", "OFF", "false", "no", " 0 "])
def test_an_off_value_turns_cudnn_off(monkeypatch, cudnn_present, value):
    monkeypatch.setenv("DISTCONV_CUDNN", value)
    assert not cudnn.usable(*_IMAGES_AND_FILTERS)


@pytest.mark.parametrize("value", [None, "", "1", "on", "yes"])
def test_cudnn_stays_on_unless_turned_off(monkeypatch, cudnn_present, value):
    if value is None:
        monkeypatch.delenv("DISTCONV_CUDNN", raising=False)
    else:
        monkeypatch.setenv("DISTCONV_CUDNN", value)
    assert cudnn.usable(*_IMAGES_AND_FILTERS)


def _cupy_13_whose_cudnn_raises(monkeypatch, error: ImportError):
    """CuPy 13.6 whose ``import cupyx.cudnn`` raises ``error``; the real CuPy (or none) after."""
    import builtins
    import types

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "cupyx.cudnn":
            raise error
        if name == "cupy":
            return types.SimpleNamespace(__version__="13.6.0")
        return real_import(name, *args, **kwargs)

    cudnn._load.cache_clear()
    monkeypatch.setattr(builtins, "__import__", fake_import)
    yield
    monkeypatch.undo()
    cudnn._load.cache_clear()  # the next caller loads the real CuPy (or none) again


@pytest.fixture
def cupy_13_without_libcudnn(monkeypatch):
    """CuPy 13.6 whose ``cupyx.cudnn`` fails as it does without cuDNN 8 on the loader's path
    (seen with the real cupy-cuda12x 13.6 wheel: its extension links ``libcudnn.so.8``)."""
    error = ImportError("libcudnn.so.8: cannot open shared object file: No such file")
    yield from _cupy_13_whose_cudnn_raises(monkeypatch, error)


@pytest.fixture
def cudnn_failing_without_a_message(monkeypatch):
    """CuPy 13 whose ``cupyx.cudnn`` raises an ImportError with no message."""
    yield from _cupy_13_whose_cudnn_raises(monkeypatch, ImportError())


def test_a_missing_libcudnn_says_which_cudnn_cupy_13_loads(cupy_13_without_libcudnn):
    """The docstring sent users to the ``nvidia-cudnn-cu12`` wheel, which brings cuDNN 9; CuPy
    13 loads ``libcudnn.so.8`` and the reason said only that it was missing."""
    assert not cudnn.available()
    reason = cudnn.unavailable_reason()
    assert reason.startswith("CuPy 13.6.0: ImportError: libcudnn.so.8"), reason
    assert "cupyx.tools.install_library --cuda 12.x --library cudnn" in reason, reason


def test_an_empty_array_goes_to_im2col(cudnn_present):
    """cuDNN's tensor descriptors refuse a zero dimension (CUDNN_STATUS_BAD_PARAM), so an
    empty batch, which the convolution layers take (a ConvProjection's shared bias test), went
    to cuDNN and failed on a device where the im2col kernels give the empty result (found
    by a cuDNN stand-in with cupyx.cudnn's signatures and checks)."""
    w = np.zeros((3, 2, 3, 3), np.float32)
    assert cudnn.usable(np.zeros((1, 2, 4, 4), np.float32), w)
    assert not cudnn.usable(np.zeros((0, 2, 4, 4), np.float32), w)


def test_a_1d_convolution_goes_to_im2col(cudnn_present):
    """cuDNN's tensors have at least 4 dimensions (cudnnSetTensorNdDescriptor), so a 1-D
    convolution's (N, C, L) arrays, which ConvProjection and ConvOperator take, went to cuDNN
    and failed on a device (found by the same stand-in)."""
    x, w = np.zeros((2, 2, 7), np.float32), np.zeros((3, 2, 3), np.float32)
    assert not cudnn.usable(x, w)
    assert cudnn.usable(x[..., None], w[..., None])  # the same as a 2-D one of width 1


def test_a_tensor_past_2_giga_elements_goes_to_im2col(cudnn_present):
    """cuDNN's descriptors hold at most 2**31 - 1 elements; a larger input, or a larger
    output (``shapes``: a transposed convolution's output outgrows its input), went to cuDNN.
    Broadcast views: the size without the memory."""
    one = np.zeros((1, 1, 1, 1), np.float16)
    big = np.broadcast_to(one, (2**31, 1, 1, 1))
    assert cudnn.usable(big[1:], one)
    assert not cudnn.usable(big, one)
    assert cudnn.usable(one, one, shapes=((2**31 - 1, 1, 1, 1),))
    assert not cudnn.usable(one, one, shapes=((1, 1, 2**16, 2**15),))


@pytest.mark.parametrize("transposed", [False, True])
def test_the_kernels_hand_usable_what_cudnn_writes(monkeypatch, cudnn_present, transposed):
    """A convolution whose output alone passes the limit (here lowered to 400 elements) runs
    on im2col: conv.py hands ``usable`` the output's shape."""
    from distconv.kernels import conv
    from distconv.kernels.shape import ConvGeometry

    def no_cudnn(*args, **kwargs):
        raise AssertionError("went to cuDNN")

    monkeypatch.setattr(cudnn, "MOST_ELEMENTS", 400)
    for name in ("conv_forward", "conv_backward_data", "conv_backward_weight"):
        monkeypatch.setattr(cudnn, name, no_cudnn)
    monkeypatch.setattr(conv, "is_gpu_array", lambda a: True)  # host arrays, the device's route
    rng = np.random.default_rng(0)
    if transposed:  # 4 x 5 x 5 = 100 elements in, 4 x 11 x 11 = 484 out at stride 2
        geom = ConvGeometry.make(2, (3, 3), (2, 2), (0, 0), (1, 1), 1)
        w = rng.standard_normal((4, 4, 3, 3))
        got = conv.conv_backward_data(rng.standard_normal((1, 4, 5, 5)), w, geom, (1, 4, 11, 11))
        assert got.shape == (1, 4, 11, 11)
    else:  # 100 elements in, 16 x 10 x 10 = 1600 out
        geom = ConvGeometry.make(2, (3, 3), (1, 1), (1, 1), (1, 1), 1)
        w = rng.standard_normal((16, 1, 3, 3))
        got, _ = conv.conv_forward(rng.standard_normal((1, 1, 10, 10)), w, geom)
        assert got.shape == (1, 16, 10, 10)


def test_cudnn_failing_without_a_message_is_named_alone(cudnn_failing_without_a_message):
    """Not ``CuPy 13.6.0: ImportError:`` with nothing after it (``messages.named``)."""
    assert not cudnn.available()
    assert cudnn.unavailable_reason() == "CuPy 13.6.0: ImportError"
