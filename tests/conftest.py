"""Shared fixtures: a seeded generator, the optional PyTorch reference, the kernel pool's use."""

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
