"""A run records the sync scheme it ran (:func:`~distconv.sync.description.sync_scheme`): a
local run's first metrics line says so, and an MPI rank's its wire dtype and buckets, as its
start line does. The parameter-server case, whose mode comes from the shards, is
tests/sync/ps/test_async_scheme_recorded.py."""

from __future__ import annotations

import enum
import sys

import numpy as np
import pytest

from distconv.init import set_seed
from distconv.job import scheme_text
from distconv.metrics import read_metrics
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.description import sync_scheme
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer

pytestmark = pytest.mark.timeout(60)


def test_a_local_runs_first_metrics_line_names_its_sync(tmp_path):
    set_seed(0)
    net = lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)
    rng = np.random.default_rng(0)
    data = {"image": rng.standard_normal((16, 1, 8, 8)), "label": rng.integers(0, 4, 16)}
    sync = LocalSync(create_optimizer("sgd", lr=0.05))
    Trainer(net, sync, 8, out_dir=tmp_path / "run", progress=False).fit(data, epochs=2)
    first, second = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert first["scheme"] == {"sync": "local"} and "scheme" not in second


class _Mode(enum.Enum):
    ASYNC = "async"


class _OwnSync(LocalSync):
    """A strategy of one's own: a ``describe()`` of its own meaning, a ``mode`` that is no
    JSON, an ``overlap`` that is a method."""

    def __init__(self, optimizer) -> None:
        super().__init__(optimizer)
        self.mode = _Mode.ASYNC

    def describe(self) -> str:
        return "my own sync"

    def overlap(self) -> bool:
        return True


def test_a_strategy_of_ones_own_is_recorded_not_a_failed_run(tmp_path):
    """Its record failed the run at epoch 1's end, before the epoch's checkpoint (review k517):
    ``dict()`` of a ``describe()`` that says a string, and a line json could not write."""
    set_seed(0)
    net = lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)
    rng = np.random.default_rng(0)
    data = {"image": rng.standard_normal((16, 1, 8, 8)), "label": rng.integers(0, 4, 16)}
    sync = _OwnSync(create_optimizer("sgd", lr=0.05))
    Trainer(net, sync, 8, out_dir=tmp_path / "run", progress=False).fit(data, epochs=1)
    (first,) = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert first["scheme"] == {"sync": "_OwnSync", "mode": "_Mode.ASYNC"}
    # a class of one's own named as a transport's is not that transport
    named_so = type("LocalSync", (_OwnSync,), {})(create_optimizer("sgd"))
    assert sync_scheme(named_so)["sync"] == "LocalSync"


def test_an_mpi_ranks_scheme_names_its_wire_and_buckets(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # MPISync's single-rank stand-in
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    from distconv.sync.mpi import MPISync

    sync = MPISync(create_optimizer("sgd"), grad_dtype="bfloat16", bucket_bytes=1 << 18)
    try:
        scheme = sync_scheme(sync)
        assert scheme == {"sync": "mpi", "grad_dtype": "bfloat16", "bucket_bytes": 1 << 18}
        assert scheme_text(scheme) == "mpi sync (grad_dtype bfloat16, bucket_bytes 262144)"
    finally:
        sync.close()
