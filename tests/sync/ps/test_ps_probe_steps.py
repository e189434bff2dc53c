"""A shard's /healthz names the highest step it applied since the seed: after a re-seed (a
resumed run, whose steps may start lower) "none yet" until the new run's first update, not the
run before's last step (docs/operations.md, Probes). In-process shard."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
from hand_shard import BLOCKS, ROWS

from distconv.service import ServiceEndpoints


def _health(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as reply:
        return reply.read().decode()


@pytest.mark.timeout(60)
def test_a_reseeded_shard_names_no_step_of_the_run_before(hand):
    h = hand(workers=1)
    with ServiceEndpoints(role="server", rank=0) as service:
        port = service.start()
        h.shard.service = service

        def push(step: int) -> None:
            head = {"op": "push", "step": step, "count": 1, "lr": 0.1, "params": [0]}
            head |= {"blocks": list(range(BLOCKS)), "versions": [0] * BLOCKS}
            reply, _ = h.ask(head, [np.zeros((ROWS, 1))] * BLOCKS)
            assert reply["op"] == "ok", reply

        h.seed()
        push(41)
        h.shard._report_probes()  # the serving loop's turn
        assert _health(port).startswith("ok: server 0, last step 41, ")
        h.seed()  # worker 0 of a resumed run, from the checkpoint of step 30
        h.shard._report_probes()
        assert _health(port).startswith("ok: server 0, last step none yet, ")
        push(31)
        h.shard._report_probes()
        assert _health(port).startswith("ok: server 0, last step 31, ")
