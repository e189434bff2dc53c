"""Shared fixtures: a seeded generator and the optional PyTorch reference."""

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
