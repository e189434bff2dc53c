"""A gradient replaced after it fired fails ``finish_step`` before any parameter moves.

``finish_step`` found the replaced gradient (``p.grad = p.grad + g`` after the callback, where
the contract says ``+=``) only when it reached that parameter's bucket: the buckets before it
were updated already, so the failed step was applied in part (with or without the
communication thread), and a second fit trained on from there. Now every gradient that fired
on this rank is checked before the first update: none moves.
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi import SingleRankComm
from tests.mpi.common import bucket_params, bucket_sync


@pytest.mark.timeout(60)
@pytest.mark.parametrize("overlap", [False, True])
def test_a_gradient_replaced_after_it_fired_leaves_every_parameter_untouched(overlap):
    # three parameters, a bucket each (24 bytes); 'a' is laid out last
    params = bucket_params("abc")
    sync = bucket_sync(comm=SingleRankComm(), overlap=overlap)
    sync.setup(params, {})
    try:
        sync.start_step(1)
        for p in reversed(params):
            p.grad += 1.0
            sync(p)
        params[0].grad = params[0].grad + 1.0  # a new array, after 'a' fired
        with pytest.raises(SyncError, match=r"gradient of 'a' was replaced.*after it fired"):
            sync.finish_step()
        for i, p in enumerate(params):
            np.testing.assert_array_equal(p.value, np.arange(3.0) + i, err_msg=p.name)
    finally:
        sync.close()
