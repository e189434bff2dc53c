"""The parameter server loads state through the syncs' ``state_problems``: per-row counts of a
count its optimizer does not keep (``step_per_row`` to Momentum, which has no ``step``) were
skipped there without a word, as in LocalSync and MPISync (tests/sync/test_contract.py)."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter


@pytest.mark.timeout(60)
def test_per_row_counts_of_a_count_momentum_lacks_are_refused_and_nothing_is_sent(shards):
    endpoints = shards.start(1, workers=1, mode="sync")
    sync = insecure_worker(endpoints, optimizer="momentum", lr=0.01)
    try:
        sync.setup([Parameter("w", np.zeros((4, 4), np.float32))])
        given = {"velocity": np.ones((4, 4), np.float32), "step_per_row": np.zeros(16, np.int64)}
        with pytest.raises(ValueError, match=r"'w' has no state 'step_per_row' \(it has"):
            sync.load_state_dict({"w": given})
        assert not sync.state_dict()["w"]["velocity"].any()
    finally:
        sync.close()
