"""``ps_helpers.assert_malformed_reply`` checks what the reply-check tests spelt out before
fecba9f factored it: with ``leads``, that the cause comes right after the error's prefix (as
``test_gather_own_value`` checked: the reply to ``all_equal:1`` is the one refused)."""

from __future__ import annotations

import pytest
from ps_helpers import assert_malformed_reply

PREFIX = "rank 0: malformed reply from a pserver: "
TAIL = " (pserver shard 0 (h:1))"


@pytest.mark.timeout(10)
def test_a_cause_asked_to_lead_must_come_right_after_the_prefix():
    assert_malformed_reply(
        ValueError(PREFIX + "all_equal:1 answered x" + TAIL),
        "all_equal:1 answered",
        "h:1",
        leads=True,
    )
    later = ValueError(PREFIX + "barrier:2 answered after all_equal:1 answered x" + TAIL)
    assert_malformed_reply(later, "all_equal:1 answered", "h:1")  # anywhere, unless asked
    with pytest.raises(AssertionError):
        assert_malformed_reply(later, "all_equal:1 answered", "h:1", leads=True)
