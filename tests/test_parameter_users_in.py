"""``Parameter.users_in``: the users of a pass counted in so far, which the sparse push reads
(:mod:`distconv.layers.written_rows`) to tell a pass's first user from a later one."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.parameter import Parameter


def test_users_in_counts_a_pass_s_users_and_starts_again_once_it_fires():
    p = Parameter("w", np.zeros((3, 2)))
    p.shared_count = 2
    fired = []
    counts = [p.users_in]
    for _ in range(3):  # one whole pass, and the first user of the next
        p.inc_update(fired.append)
        counts.append(p.users_in)
    assert counts == [0, 1, 0, 1] and fired == [p]
    p.reset_pending()  # a pass abandoned: the next one starts at 0
    assert p.users_in == 0


def test_users_in_is_read_only():
    with pytest.raises(AttributeError):
        Parameter("w", np.zeros(2)).users_in = 1
