"""A gather tag's counter is ASCII decimal digits, as docs/protocol.md says:
``str.isdigit`` took any Unicode digit (``barrier:²``, ``allreduce:٣``), so such a tag was
held as a gather of its own. In-process shard."""

from __future__ import annotations

import pytest
from test_ps_hello_description import GOOD


@pytest.mark.timeout(60)
@pytest.mark.parametrize("tag", ["barrier:²", "allreduce:٣", "all_equal:１", "barrier:1²"])
def test_a_tag_of_other_unicode_digits_is_refused(hand, tag):
    h = hand(workers=2)
    assert h.answer({"op": "hello", "rank": 0, "host": "h", **GOOD})["op"] == "ok"
    reply = h.answer({"op": "gather", "tag": tag, "value": None})
    assert reply is not None and reply["op"] == "error", reply
    assert "decimal digits, 0-9" in reply["error"], reply
    assert not h.shard.gathers_held
    assert h.answer({"op": "gather", "tag": "barrier:1", "value": None}) is None  # held
