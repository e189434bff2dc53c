"""What a shard sends back: snapshots of the values, never more than its cap, no repeated ids.

An in-process shard answers a raw ZeroMQ client; the test hands it each request (the
loop ``Shard.serve`` runs, one request at a time), so the order of events is fixed: a client that
pushes step 2 before it reads the reply to step 1 must still read step 1's values. ZeroMQ is
made to really hold a reply, whatever the timing: the client takes one message into its queue
(``RCVHWM`` 1) and leaves an earlier reply unread there, so its I/O thread stops reading and a
1 MiB reply cannot get through the small socket buffers. The shard's replies are copies (pyzmq
copies them into ZeroMQ's own messages as they are sent), so the update that follows leaves the
held reply alone.
"""

from __future__ import annotations

import numpy as np
import pytest
from hand_shard import BLOCKS, ROWS, TABLE_LEN, TABLE_ROWS


def _push(step: int, versions: int) -> tuple[dict, list[np.ndarray]]:
    head = {"op": "push", "step": step, "count": 1, "lr": 1.0, "params": [0]}
    head.update(blocks=list(range(BLOCKS)), versions=[versions] * BLOCKS)
    return head, [np.ones((ROWS, 1))] * BLOCKS


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_reply_read_after_the_next_push_still_carries_its_own_step(hand, mode):
    h = hand(small_buffers=True, mode=mode, max_staleness=10)
    h.seed()
    h.block_the_client()
    h.send(*_push(1, 0))  # sgd, lr 1, gradient 1, 1 example: w becomes -1, then -2
    h.send(*_push(2, 1))  # before the client has read the reply to step 1
    h.read()  # the reply that blocked the client
    for step in (1, 2):
        reply, (values,) = h.read()
        assert reply["op"] == "ok" and reply["versions"] == [step] * BLOCKS, reply
        np.testing.assert_array_equal(values.view(np.float64), -float(step))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_replies_are_sent_as_copies_lending_zeromq_nothing(hand, mode):
    # a lent frame would wake pyzmq's garbage-collector thread for every reply
    h = hand(mode=mode)
    h.seed()
    reply, _ = h.ask(*_push(1, 0))
    assert reply["op"] == "ok", reply
    frames, copied = h.sent[-1]
    assert len(frames) == 2 and copied


@pytest.mark.timeout(60)
def test_async_replies_to_several_workers_carry_their_own_update(hand):
    h = hand(small_buffers=True, mode="async", workers=2, max_staleness=10)
    h.seed()
    h.block_the_client()
    h.send(*_push(1, 0))
    h.send(*_push(2, 1))  # reply 1 is held by ZeroMQ, a copy: the update leaves it alone
    h.read()
    for step in (1, 2):
        reply, (values,) = h.read()
        assert reply["versions"] == [step] * BLOCKS, reply
        np.testing.assert_array_equal(values.view(np.float64), -float(step))


@pytest.mark.timeout(60)
def test_a_pull_reply_is_a_snapshot_too(hand):
    h = hand(small_buffers=True)
    h.seed()
    h.block_the_client()
    h.send({"op": "pull", "blocks": [0, 1]})  # a run of blocks: one slice of the store
    h.send(*_push(1, 0))
    h.read()
    _, (values,) = h.read()
    np.testing.assert_array_equal(values.view(np.float64), 0.0)


@pytest.mark.timeout(60)
def test_repeated_block_ids_are_refused_and_the_shard_serves_on(hand):
    h = hand()
    h.seed()
    for op in ("pull", "get_state"):
        reply, arrays = h.ask({"op": op, "blocks": [0, 1, 0]})
        assert reply["op"] == "error" and "repeat" in reply["error"] and not arrays, reply
    reply, (values,) = h.ask({"op": "pull", "blocks": [0, 1]})
    assert reply["op"] == "ok" and values.nbytes == 2 * ROWS * 8


@pytest.mark.timeout(60)
def test_a_reply_over_the_message_cap_is_refused_and_the_shard_serves_on(hand):
    h = hand(max_message_bytes=TABLE_ROWS * TABLE_LEN * 8)  # 640 KiB: 2.5 blocks of w
    h.seed("momentum")  # momentum keeps one array per block: get_state is as big as a pull
    over = "over the shard's max_message_bytes 655360"
    for op in ("pull", "get_state"):
        reply, arrays = h.ask({"op": op, "blocks": [0, 1, 2]})  # 768 KiB
        assert reply["op"] == "error" and over in reply["error"] and not arrays, reply
    every_row = np.arange(TABLE_ROWS, dtype=np.int64)  # 16 KiB of ids + 640 KiB of rows back
    reply, arrays = h.ask({"op": "pull", "blocks": [BLOCKS], "rows": [TABLE_ROWS]}, [every_row])
    assert reply["op"] == "error" and over in reply["error"] and not arrays, reply
    reply, (ids, rows) = h.ask({"op": "pull", "blocks": [BLOCKS], "rows": [3]}, [every_row[5:8]])
    assert reply["op"] == "ok", reply
    np.testing.assert_array_equal(ids, [5, 6, 7])
    np.testing.assert_array_equal(rows, np.repeat([[5.0], [6.0], [7.0]], TABLE_LEN, axis=1))
    reply, (values,) = h.ask({"op": "pull", "blocks": [0, 1]})
    assert reply["op"] == "ok" and values.nbytes == 2 * ROWS * 8
    reply, state = h.ask({"op": "get_state", "blocks": [2, 3]})
    assert reply["op"] == "ok" and sum(a.nbytes for a in state) == 2 * ROWS * 8, reply
