"""``PServerSync(block_bytes=...)`` that cuts no block is refused when the sync is made, as a bad
``push_bytes`` or ``timeout`` is, not at setup after the sockets opened and the shards answered
(review of a researcher's walk)."""

from __future__ import annotations

import os

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


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts this process's files")
@pytest.mark.parametrize("push_bytes", [-1, 1.5, True, "64"])
@pytest.mark.timeout(30)
def test_a_push_size_that_is_no_byte_count_is_refused_before_a_socket_opens(push_bytes):
    """push_bytes was checked after the sockets and the context opened, which the refusal left
    open (ResourceWarning: unclosed socket, until collected), and 1.5, True and "64" were taken
    as 1, 1 and 64."""
    before = _open_files()
    try:
        made = insecure_worker(["127.0.0.1:1"], push_bytes=push_bytes)
    except ValueError as exc:  # what it made, its traceback keeps alive here
        opened, said = _open_files() - before, str(exc)
    else:
        made.close()
        pytest.fail(f"push_bytes={push_bytes!r} was taken")
    assert said.startswith("push_bytes must be an int >= 0 or None, got "), said
    assert opened == 0, said


@pytest.mark.timeout(30)
def test_a_push_size_of_none_zero_or_a_numpy_int_is_taken():
    for push_bytes in (None, 0, np.int64(4096)):
        insecure_worker(["127.0.0.1:1"], push_bytes=push_bytes).close()
