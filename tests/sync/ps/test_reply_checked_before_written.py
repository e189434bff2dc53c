"""Every shard's reply to a pull or an async ``get_state`` is checked before any is written.

A reply whose versions or values do not fit the blocks asked for is refused naming its shard
(:meth:`ReplyWriter._check_reply`). The replies were checked one by one as each was written, so
shard 0's values were already in the chief's parameters when shard 1's reply was refused: half
a model of another moment, and on a GPU host copies never moved to the device. The stand-in
for the faulty shard is a real shard process whose pull and ``get_state`` replies to rank 0
are tampered with: one version short, or a values frame one byte short.
"""

from __future__ import annotations

import re

import pytest
from ps_helpers import (
    batches,
    insecure_worker,
    refused_without_writing,
    shard_argv,
    small_net,
    train_steps,
)

from distconv.sync.base import SyncError
from distconv.sync.ps.client import PServerSync

#: ``python -m distconv`` whose replies to rank 0's pulls and get_states are malformed (argv[1]);
#: ``nan``, ``inf``: a pull's last value (a float64) is that
FAULTY_SHARD = """
import sys
import numpy as np
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers

fault = sys.argv.pop(1)

def tampered(op):
    def handler(self, ident, header, arrays):
        if header.get("rank") != 0:
            return op(self, ident, header, arrays)
        reply = self._reply
        def bad(ident, request, out=(), error=None, **fields):
            if fault == "versions" and "versions" in fields:
                fields["versions"] = fields["versions"][:-1]
            if fault == "frame" and out:
                out = [*out[:-1], out[-1][:-1]]
            if fault in ("nan", "inf") and out and header["op"] == "pull":  # the last value
                out = [*out[:-1], out[-1].copy()]
                out[-1][-8:] = np.frombuffer(np.float64(fault).tobytes(), np.uint8)
            if fault == "keys" and fields.get("keys"):
                fields["keys"] = fields["keys"][:-1]
            reply(ident, request, out, error, **fields)
        self._reply = bad
        try:
            op(self, ident, header, arrays)
        finally:
            del self._reply
    return handler

RequestHandlers._op_pull = tampered(RequestHandlers._op_pull)
RequestHandlers._op_get_state = tampered(RequestHandlers._op_get_state)
raise SystemExit(main(sys.argv[1:]))
"""


def shard_command(
    shard: int, fault: str | None, shards: int = 2, workers: int = 2, mode: str = "async"
) -> list[str]:
    """A shard's command line: of this release, or faulty (``fault``)."""
    start = ["-c", FAULTY_SHARD, fault] if fault else ["-m", "distconv"]
    return shard_argv(start, shard=shard, shards=shards, workers=workers, mode=mode)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fault", ["versions", "frame"])
@pytest.mark.parametrize("request_", ["pull", "get_state"])
def test_a_malformed_reply_of_one_shard_writes_no_values_of_the_others(
    shards, tmp_path, fault, request_
):
    ask = PServerSync.refresh_parameters if request_ == "pull" else PServerSync.state_dict
    refused, endpoints = refused_without_writing(
        shards, tmp_path, lambda s: shard_command(s, fault if s == 1 else None), ask
    )
    said = str(refused)
    assert said.startswith("rank 0: malformed reply from a pserver: "), said
    assert said.endswith(f" (pserver shard 1 ({endpoints[1]}))"), said


@pytest.mark.timeout(60)
def test_a_state_reply_without_one_of_the_optimizers_keys_is_refused(shards, tmp_path):
    """The state's keys and arrays were read as the reply listed them: a reply listing Adam's
    ``m`` and ``step`` (not ``v``) with all three arrays gave a checkpoint whose ``m`` of one
    block was another's ``v``, and whose ``v`` was all 0, without a word."""
    endpoint = shards.launch(shard_command(0, "keys", 1, 1, "sync"), tmp_path / "shard.log")
    net = small_net()
    sync = insecure_worker([endpoint], optimizer="adam", timeout=10)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 8))
        with pytest.raises(SyncError) as refused:
            sync.state_dict()
    finally:
        sync.close()
    said = str(refused.value)
    assert "state keys ['m', 'step'], the optimizer keeps ['m', 'step', 'v']" in said, said
    assert said.endswith(f" (pserver shard 0 ({endpoint}))"), said


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fault", ["nan", "inf"])
def test_a_pull_reply_with_a_non_finite_value_is_refused(shards, tmp_path, fault):
    """A reply's values were written into the parameters unchecked: a NaN or inf a shard sent
    (its store corrupted, a bug) went into every later forward pass, found at a checkpoint if
    at all. Each floating block of a reply is checked finite (one pass, np.isfinite) before
    anything is written, and the reply refused naming the shard and the parameter, and what to
    do (not as a "malformed reply": a diverged update makes one as well as a bad store)."""
    refused, endpoints = refused_without_writing(
        shards,
        tmp_path,
        lambda s: shard_command(s, fault if s == 1 else None),
        PServerSync.refresh_parameters,
    )
    said = str(refused)
    assert re.match(
        r"rank 0: non-finite values \(NaN or inf\) for parameter \S+ \(block \d+\) ", said
    )
    assert "its update diverged (lower the learning rate" in said, said  # not "malformed"
    assert said.endswith(f" (pserver shard 1 ({endpoints[1]}))"), said
