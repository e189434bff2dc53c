"""The checks of a sparse reply's row ids against those asked for or pushed name what differs,
whatever they are given.

Each looked for the block at fault with ``next()`` and no default: given fewer lists of ids
asked than blocks (the ids of the blocks past them unchecked by ``zip``), or a pushed row in
none of the blocks, it raised a bare ``StopIteration``, which says nothing, and which inside a
generator becomes a ``RuntimeError``. The reply path builds its lists per block, so this is the
helpers' own contract, held here.
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.sync.ps.blocks import Block
from distconv.sync.ps.inbox import _check_rows_asked, _check_rows_listed
from distconv.sync.ps.wire import WireError

BLOCKS = [Block(0, 0, 0, 3, 48), Block(1, 0, 3, 6, 48)]


def _ids(*ids: int) -> np.ndarray:
    return np.array(ids, dtype=np.int64)


def test_ids_asked_for_fewer_blocks_than_the_reply_holds_are_named():
    with pytest.raises(WireError, match=r"row ids asked for 1 of the 2 blocks"):
        _check_rows_asked(BLOCKS, [_ids(0), _ids(3)], [1, 1], [_ids(0)], "asked for")


def test_ids_that_differ_name_their_block():
    with pytest.raises(WireError, match=r"rows of block 1: not the 1 asked for"):
        _check_rows_asked(BLOCKS, [_ids(0), _ids(4)], [1, 1], [_ids(0), _ids(3)], "asked for")


def test_a_pushed_row_outside_every_block_is_named():
    with pytest.raises(WireError, match=r"row 7 was pushed, outside blocks \[0, 1\]"):
        _check_rows_listed(BLOCKS, [_ids(0), _ids(3)], [_ids(0), _ids(3, 7)])


def test_a_pushed_row_left_out_names_its_block():
    with pytest.raises(WireError, match=r"rows of block 1: row 4 was pushed, the reply leaves"):
        _check_rows_listed(BLOCKS, [_ids(0), _ids(3)], [_ids(0), _ids(3, 4)])
