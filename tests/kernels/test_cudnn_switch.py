"""``DISTCONV_CUDNN`` read as every ``DISTCONV_*`` switch is (``messages.env_switch``): only
``0`` turned cuDNN off, so ``DISTCONV_CUDNN=off`` or ``false`` kept it on without a word.

No CUDA device here: ``available`` (does this CuPy reach cuDNN) is taken as true, and the
arrays are host arrays, since ``usable`` reads nothing of them but their dtype."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.kernels import cudnn

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def cudnn_present(monkeypatch):
    monkeypatch.setattr(cudnn, "available", lambda: True)


@pytest.mark.parametrize("value", ["0", "off", "OFF", "false", "no", " 0 "])
def test_an_off_value_turns_cudnn_off(monkeypatch, cudnn_present, value):
    monkeypatch.setenv("DISTCONV_CUDNN", value)
    assert not cudnn.usable(np.zeros(2, np.float32), np.zeros(2, np.float32))


@pytest.mark.parametrize("value", [None, "", "1", "on", "yes"])
def test_cudnn_stays_on_unless_turned_off(monkeypatch, cudnn_present, value):
    if value is None:
        monkeypatch.delenv("DISTCONV_CUDNN", raising=False)
    else:
        monkeypatch.setenv("DISTCONV_CUDNN", value)
    assert cudnn.usable(np.zeros(2, np.float32), np.zeros(2, np.float32))
