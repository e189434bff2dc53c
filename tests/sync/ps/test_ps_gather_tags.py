"""A gather tag's counter is ASCII decimal digits, as docs/protocol.md says (review k132):
``str.isdigit`` took any Unicode digit (``barrier:²``, ``allreduce:٣``), so such a tag was
held as a gather of its own. In-process shard."""

from __future__ import annotations

import pytest
from test_ps_hello_description import GOOD


def _reply(h, head: dict) -> dict | None:
    """The reply to ``head``, or None if the shard holds it (a gather)."""
    h.send(head)
    return h.read()[0] if h.client.poll(2000) else None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("tag", ["barrier:²", "allreduce:٣", "all_equal:１", "barrier:1²"])
def test_a_tag_of_other_unicode_digits_is_refused(hand, tag):
    h = hand(workers=2)
    assert _reply(h, {"op": "hello", "rank": 0, "host": "h", **GOOD})["op"] == "ok"
    reply = _reply(h, {"op": "gather", "tag": tag, "value": None})
    assert reply is not None and reply["op"] == "error", reply
    assert "decimal digits, 0-9" in reply["error"], reply
    assert not h.shard.gathers_held
    assert _reply(h, {"op": "gather", "tag": "barrier:1", "value": None}) is None  # held
