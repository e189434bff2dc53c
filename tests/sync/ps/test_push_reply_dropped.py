"""A push's reply says how many of its parameters were dropped: a count from 0 to the
parameters pushed, checked before the reply is written.

The worker added ``int(header["dropped"])`` to its ``drops`` after writing the reply: a count
that was a string (``"1"``) or ``true`` was taken as a number, one that was no number failed
there with a bare ValueError naming no shard (the values written already), and a negative count
or one over the parameters pushed went into ``drops`` (the ``stale_dropped`` a run reports)
without a word. The shard is a real async shard process whose
push replies are tampered with.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from ps_helpers import assert_malformed_reply, insecure_worker, shard_argv

from distconv.parameter import Parameter
from distconv.sync.base import SyncError

#: ``python -m distconv`` whose push replies say ``dropped`` is the JSON argv[1]
TAMPERED_SHARD = """
import json, sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

dropped = json.loads(sys.argv.pop(1))
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if "dropped" in fields:
        fields["dropped"] = dropped
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


def _step(endpoint: str) -> tuple[SyncError | None, int, np.ndarray]:
    """One step of one parameter on the shard: the error, the drops and the values after."""
    weight = Parameter("w", np.zeros((4, 2)))
    sync = insecure_worker([endpoint], lr=1.0, timeout=10)
    error = None
    try:
        sync.setup([weight])
        sync.start_step(1)
        weight.grad[...] = 1.0
        sync.on_gradient(weight)
        try:
            sync.finish_step()
        except SyncError as exc:
            error = exc
    finally:
        sync.close()
    return error, sync.drops, weight.value.copy()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("dropped", ['"1"', "-1", "2", "true"])
def test_a_dropped_count_out_of_range_is_refused_before_writing(shards, tmp_path, dropped):
    argv = shard_argv(["-c", TAMPERED_SHARD, dropped], mode="async")
    endpoint = shards.launch(argv, tmp_path / "shard.log")
    error, drops, values = _step(endpoint)
    assert error is not None, f"dropped {dropped} taken: drops {drops}"
    want = f"dropped {json.loads(dropped)!r}, not a count of the 1 parameters pushed"
    assert_malformed_reply(error, want, endpoint)
    np.testing.assert_array_equal(values, 0.0)  # nothing of the reply was written
    assert drops == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("dropped", [0, 1])
def test_a_dropped_count_in_range_is_counted(shards, tmp_path, dropped):
    argv = shard_argv(["-c", TAMPERED_SHARD, str(dropped)], mode="async")
    error, drops, values = _step(shards.launch(argv, tmp_path / "shard.log"))
    assert error is None and drops == dropped
    np.testing.assert_array_equal(values, -1.0)  # SGD, lr 1, one example: the update applied
