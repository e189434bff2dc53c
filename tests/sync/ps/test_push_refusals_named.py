"""A sync push refused for its step (another than the one held, or one done already), or as a
repeat, names the rank and the parameter.

A shard of a sync job holds each parameter's pushes until every rank has sent its own. A push
for another step than the one held was refused with ``push for step 4, shard is collecting
step 3``, naming neither the rank that pushed nor the parameter; a second push of a rank in one
step with ``rank 0 pushed parameter 0 twice``, the shard's index of the parameter, which no
user sees anywhere else. Both now name the rank and the parameter, as does a push of a step
done already (``stale push: step 3 of parameter w done`` named no rank). Two real
workers seed a shard of two; a bare socket then pushes as each rank, and the shard goes on to
serve a pull.
"""

from __future__ import annotations

import numpy as np
import pytest
import zmq
from ps_helpers import insecure_worker, raw_dealer, run_ranks, small_net

from distconv.sync.ps.wire import pack, unpack_header


@pytest.mark.timeout(60)
def test_a_push_of_another_step_a_done_step_or_a_repeat_names_its_rank_and_parameter(shards):
    (endpoint,) = shards.start(1, workers=2)
    nets = [small_net(), small_net()]
    syncs = [insecure_worker([endpoint], rank=r, world=2, timeout=10) for r in range(2)]
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)

    def push(rank: int, step: int, rid: int, held: bool = False) -> dict:
        head = {"op": "push", "id": rid, "job": "local", "rank": rank, "step": step, "count": 1}
        head.update(lr=0.1, params=[0], blocks=[b.id for b in blocks], versions=[0] * len(blocks))
        raw.send_multipart(pack(head, [np.zeros(sum(b.stop - b.start for b in blocks) * 8, "u1")]))
        if held:  # the other rank's push is awaited: no reply
            assert not raw.poll(300), f"rank {rank}'s push alone was answered"
            return {}
        # a refusal may take longer than the 300 ms a held push is given on a busy machine
        assert raw.poll(10_000), f"rank {rank}'s push of step {step} got no reply in 10 s"
        return unpack_header(raw.recv_multipart()[0], request=False)

    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), world=2, timeout=40)
        blocks = syncs[0].layout.blocks_on(0, 0)
        name = nets[0].parameters()[0].name
        push(0, 3, 1, held=True)
        other_step = push(1, 4, 2)
        repeat = push(0, 3, 3)
        assert push(1, 3, 4)["op"] == "ok", "rank 1's push did not complete step 3"
        assert raw.poll(10_000), "rank 0's push was not answered with step 3 complete"
        raw.recv_multipart()
        stale = push(1, 3, 5)  # step 3 is done
        pull = pack({"op": "pull", "id": 6, "job": "local", "rank": 0, "blocks": [blocks[0].id]})
        raw.send_multipart(pull)
        assert raw.poll(10_000), "the shard did not answer a pull after the refusals"
        served = unpack_header(raw.recv_multipart()[0], request=False)
    finally:
        raw.close(0)
        ctx.term()
        for s in syncs:
            s.close()
    assert other_step["op"] == "error", other_step
    said = other_step["error"]
    assert f"rank 1 pushed {name} for step 4, shard is collecting step 3" in said, said
    assert repeat["op"] == "error", repeat
    assert f"rank 0 pushed {name} twice in step 3" in repeat["error"], repeat
    assert stale["op"] == "error", stale
    assert f"stale push: rank 1 pushed {name} for step 3, done already" in stale["error"], stale
    assert served["op"] == "ok", served
