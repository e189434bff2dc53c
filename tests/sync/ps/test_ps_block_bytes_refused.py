"""``PServerSync(block_bytes=...)`` that cuts no block is refused when the sync is made, as a bad
``push_bytes`` or ``timeout`` is, not at setup after the sockets opened and the shards answered
(review of a researcher's walk)."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker


@pytest.mark.parametrize("block_bytes", [0, -5, 1.5, True, "64"])
@pytest.mark.timeout(30)
def test_a_block_size_that_cuts_no_block_is_refused_at_once(block_bytes):
    with pytest.raises(ValueError, match=r"block_bytes must be an int >= 1, got "):
        insecure_worker(["127.0.0.1:1"], block_bytes=block_bytes)  # no shard: refused first


@pytest.mark.timeout(30)
def test_a_block_size_of_one_byte_and_a_numpy_int_are_taken():
    for block_bytes in (1, np.int64(4096)):
        insecure_worker(["127.0.0.1:1"], block_bytes=block_bytes).close()
