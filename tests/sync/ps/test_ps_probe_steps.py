"""A shard's /healthz names the highest step it applied since the seed: after a re-seed (a
resumed run, whose steps may start lower) "none yet" until the new run's first update, not the
run before's last step, and distconv_step -1 (docs/operations.md, Probes). In-process shard."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
from hand_shard import BLOCKS, ROWS
from prometheus_client.parser import text_string_to_metric_families

from distconv.service import ServiceEndpoints


def _health(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as reply:
        return reply.read().decode()


def _step_metric(port: int) -> float:
    """``distconv_step`` as /metrics says it."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (sample,) = families["distconv_step"].samples
    return sample.value


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

        assert _step_metric(port) == -1  # none yet: step 0 is a step
        h.seed()
        push(41)
        h.shard._report_probes()  # the serving loop's turn
        assert _health(port).startswith("ok: server 0, last step 41, ")
        assert _step_metric(port) == 41
        h.seed()  # worker 0 of a resumed run, from the checkpoint of step 30
        h.shard._report_probes()
        assert _health(port).startswith("ok: server 0, last step none yet, ")
        assert _step_metric(port) == -1  # not the run before's 41
        push(31)
        h.shard._report_probes()
        assert _health(port).startswith("ok: server 0, last step 31, ")
        assert _step_metric(port) == 31
