"""Array tables and parameter entries that used to slip past the wire checks: a list or map as a
dtype (unhashable), a shape of 0 bytes that numpy cannot build (``[0, 2**63]``), bools as sizes.
Each is refused with a short one-line error before any array exists, and a live shard answers
them without a traceback in its log and goes on serving."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
import zmq
from ps_helpers import batches, insecure_worker, raw_dealer, small_net, train_steps

from distconv.sync.ps.state import _param_spec
from distconv.sync.ps.wire import WireError, pack, unpack_arrays, unpack_header

BAD_ENTRIES = [
    (["float64"], [0], 0),  # a list as the dtype: unhashable
    ({"x": 1}, [0], 0),  # a map as the dtype
    ("float64", [0, 2**63], 0),  # 0 bytes, yet no array can have that shape
    ("float64", [2**61, 0, 4], 0),  # the non-zero dimensions alone are 2**66 bytes
    ("float64", [True], 8),  # a bool is not a size
    ("float64", [1.0], 8),
    ("float64", [-1], 8),
    ("float64", [1], True),
]


def _message(entry, op="pull"):
    """A request whose only array table entry is ``entry`` and whose frame is empty."""
    head = {"op": op, "id": 4, "job": "local", "rank": 0, "blocks": [0], "rows": [0]}
    frames = pack(head, [np.zeros(0, np.int64)])
    header = msgpack.unpackb(frames[0])
    header["arrays"] = [list(entry)]
    frames[0] = msgpack.packb(header)
    return frames


@pytest.mark.parametrize("entry", BAD_ENTRIES)
def test_a_bad_table_entry_is_refused_before_any_array_exists(entry):
    frames = _message(entry)
    said = r"^array 0: (dtype|shape|nbytes) .* (is not|declares|has) "
    with pytest.raises(WireError, match=said) as err:
        unpack_arrays(unpack_header(frames[0]), frames[1:], max_bytes=1 << 30)
    assert "\n" not in str(err.value)


def test_errors_quote_received_values_short():
    frames = _message(["float64", list(range(10_000)), 0])
    with pytest.raises(WireError) as err:
        unpack_arrays(unpack_header(frames[0]), frames[1:])
    assert len(str(err.value)) < 200 and "..." in str(err.value)


@pytest.mark.parametrize(
    "entry",
    [
        ["w", [2, 3], ["float64"], False],  # unhashable dtype
        ["w", [2, 3], {"a": 1}, False],
        ["w", [True, 3], "float64", False],
        ["w", [0, 2**63], "float64", True],  # 2**66 bytes in its non-zero dimensions
        ["w", [2, 3], "float64", 1],
        [["w"], [2, 3], "float64", False],
    ],
)
def test_a_bad_parameter_entry_of_a_seed_is_refused(entry):
    with pytest.raises(WireError, match="^seed: parameter (entry|shape)"):
        _param_spec(entry)


def _seed_with_param(entry):
    head = {
        "op": "seed",
        "id": 5,
        "job": "local",
        "rank": 0,
        "params": [entry],
        "table": [[0, 0, 0, 1]],
        "optimizer": {"name": "sgd", "lr": 0.1},
    }
    return pack(head, [np.zeros((1, 1))])


@pytest.mark.timeout(60)
def test_a_live_shard_answers_bad_tables_in_one_line_and_serves_on(shards):
    (endpoint,) = shards.start(1, workers=1)
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    messages = [_message(e) for e in BAD_ENTRIES]
    messages += [_seed_with_param(["w", [1], ["float64"], False])]
    messages += [_seed_with_param(["w", [0, 2**63], "float64", True])]
    sync = insecure_worker([endpoint])
    try:
        for frames in messages:
            raw.send_multipart(frames)
            assert raw.poll(10_000), "the shard did not answer"
            reply = unpack_header(raw.recv_multipart()[0], request=False)
            assert reply["op"] == "error"
            assert not reply["error"].startswith("shard error"), reply["error"]
        net = small_net()
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 4))
        assert sync.shard_stats()[0]["errors"] == len(messages)
    finally:
        sync.close()
        raw.close(0)
        ctx.term()
    assert "Traceback" not in shards.log_text()
