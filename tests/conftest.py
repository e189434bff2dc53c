"""Shared fixtures: a seeded generator, the optional PyTorch reference, the kernel pool's use,
the convolution layout forced."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture
def torch():
    """PyTorch as an independent reference; CI installs torch==2.13.0 CPU so these run there."""
    return pytest.importorskip("torch", reason="PyTorch is not importable: parity tests skipped")


@pytest.fixture
def pool_use(monkeypatch) -> list:
    """Each time a kernel hands chunks to distconv's thread pool, the pool's size: so a test
    of thread counts can check that its chunks really ran on threads."""
    from distconv.kernels import parallel

    submitted: list = []
    real_executor = parallel._executor
    monkeypatch.setattr(parallel, "_executor", lambda n: submitted.append(n) or real_executor(n))
    return submitted


@pytest.fixture
def force_layout(monkeypatch):
    """``force_layout(batched)`` sends every CPU convolution of the test into one layout, past
    the cost model's thresholds."""
    from distconv.kernels import conv_layout

    def force(batched: bool) -> None:
        monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)  # it would time both instead
        monkeypatch.setattr(conv_layout, "BATCHED_MAX_POSITIONS", 10**9 if batched else 0)
        monkeypatch.setattr(conv_layout, "BATCHED_MIN_ROWS", 0)

    return force


@pytest.fixture(params=["per_sample", "batched"])
def layout(request, force_layout) -> str:
    """The test runs once in each convolution layout."""
    force_layout(request.param == "batched")
    return request.param
