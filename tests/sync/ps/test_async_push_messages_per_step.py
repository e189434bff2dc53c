"""A step of a model with a sparse table sends a shard two push messages, however small its
gradients: the table's rows travel in a message of their own (docs/protocol.md, "Stats"), so
``push_messages_applied`` counts two a step where a dense model's would count one."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, sparse_table_net

from distconv.arg import Arg

TABLE = "embed.proj0.weight"


@pytest.mark.timeout(60)
def test_a_sparse_tables_rows_go_in_a_push_message_of_their_own(shards):
    endpoints = shards.start(1, workers=1, mode="async")
    net, sync = sparse_table_net(50, 4, 3), insecure_worker(endpoints)
    words = np.array([1, 2, 3, 7])
    try:
        sync.setup(net.parameters())
        for _ in range(3):
            sync.prefetch({TABLE: words})
            sync.start_step(len(words))
            net.forward(
                {
                    "words": Arg(ids=words, needs_grad=False),
                    "label": Arg(ids=words % 3, needs_grad=False),
                }
            )
            net.backward(sync, loss="loss", loss_scale=len(words))
            sync.finish_step()
        (stats,) = sync.shard_stats()
        sent, push_bytes = sync.push_messages, sync.push_bytes
    finally:
        sync.close()
    gradient_bytes = sum(p.value.nbytes for p in net.parameters())
    assert gradient_bytes < push_bytes  # no step's gradients pass push_bytes
    assert stats["push_messages"] == stats["push_messages_applied"] == sent == 3 * 2
    n = len(net.parameters())
    assert (stats["pushes"], stats["updates"]) == (3 * n, 3 * n)
    assert stats["updates_by_staleness"][0] == 3 * n
