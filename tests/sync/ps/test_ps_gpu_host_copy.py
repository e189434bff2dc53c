"""A worker whose parameters live on a GPU writes a reply's rows into a host copy, then copies
the whole copy to the device. The copy was kept across ``setup``: after a second setup (a
restore wrote new values onto the device), a sparse pull of a few rows copied the stale rest
back over the restored values. Skipped without cupy and a CUDA device, as on
CI; ``benchmarks/gpu.py`` runs it on a GPU machine.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, sparse_table_net

from distconv.backend import to_host

pytestmark = pytest.mark.gpu
VOCAB, WIDTH, TABLE = 64, 4, "embed.proj0.weight"


@pytest.mark.timeout(120)
def test_a_second_setup_pulls_rows_onto_the_restored_values(cupy, shards):
    net = sparse_table_net(VOCAB, WIDTH, 3, seed=3)
    params = {p.name: p for p in net.parameters()}
    assert isinstance(params[TABLE].value, cupy.ndarray)  # else this proves nothing
    sync = insecure_worker(shards.start(1, workers=1), lr=0.1, block_bytes=1 << 16)
    try:
        sync.setup(net.parameters())
        sync.prefetch({TABLE: np.array([1, 2])})  # the host copy is made here
        restored = to_host(params[TABLE].value) + 1.0
        params[TABLE].value[...] = cupy.asarray(restored)
        sync.setup(net.parameters())  # seeds the shard with the restored values
        sync.prefetch({TABLE: np.array([3])})
        np.testing.assert_array_equal(to_host(params[TABLE].value), restored)
    finally:
        sync.close()
