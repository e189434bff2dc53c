"""``docs/protocol.md`` against the code: every op, header field, stat and shard flag is
documented, and the shard does what the page says of bytes_out and unreadable messages."""

from __future__ import annotations

import re
from pathlib import Path

import msgpack
import zmq
from ps_helpers import REPO_ROOT, raw_dealer, small_net

from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.header_fields import FIELDS, REQUIRED
from distconv.sync.ps.state import Stats
from distconv.sync.ps.wire import PROTOCOL_VERSION, pack, unpack_header

DOC = (REPO_ROOT / "docs" / "protocol.md").read_text()


def _table_ops() -> set[str]:
    return set(re.findall(r"^\| `(\w+)` \| (?:any|rank 0|every)", DOC, re.M))


def test_every_op_field_stat_and_flag_is_documented():
    assert f"protocol (version {PROTOCOL_VERSION})" in DOC
    assert f"`v` is the integer {PROTOCOL_VERSION} " in DOC
    # the Common fields table too (it said 4 through versions 5 and 6)
    assert f"| `v` | int | protocol version, {PROTOCOL_VERSION} (" in DOC
    assert _table_ops() == set(REQUIRED)
    missing = [f for f in FIELDS if f"`{f}`" not in DOC]
    assert not missing, f"header fields not in docs/protocol.md: {missing}"
    stats = DOC[DOC.index("## Stats") :]
    assert not [k for k in Stats().as_dict() if f"| `{k}` |" not in stats]
    from distconv.sync.ps import cli

    flags = set(re.findall(r'"(--[a-z-]+)"', Path(cli.__file__).read_text()))
    undocumented = [f for f in sorted(flags) if not re.search(rf"(?<![\w-]){f}(?![\w-])", DOC)]
    assert not undocumented, f"pserver flags not in docs/protocol.md: {undocumented}"


def test_bytes_out_counts_every_frame_after_the_identity_and_garbage_gets_id_minus_1(shards):
    (endpoint,) = shards.start(1, workers=1)
    sync = PServerSync(
        create_optimizer("sgd"), rank=0, world_size=1, pservers=[endpoint], insecure=True
    )
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    try:
        sync.setup(small_net().parameters())
        before = sync.shard_stats()[0]
        raw.send_multipart(pack({"op": "pull", "id": 5, "job": "local", "rank": 0, "blocks": [0]}))
        assert raw.poll(10_000)
        reply = raw.recv_multipart()
        raw.send_multipart([b"\xc1 not msgpack", b"junk"])
        assert raw.poll(10_000)
        garbage = raw.recv_multipart()
        after = sync.shard_stats()[0]
    finally:
        sync.close()
        raw.close(0)
        ctx.term()
    assert unpack_header(reply[0], request=False)["id"] == 5
    head = unpack_header(garbage[0], request=False)
    assert head["op"] == "error" and head["id"] == -1 and "not msgpack" in head["error"]
    # bytes_out between the two stats requests: the pull's reply, the error, and the reply to
    # the first stats request itself (the second is counted after it was built)
    first_stats = after["bytes_out"] - before["bytes_out"] - sum(map(len, reply + garbage))
    assert 0 < first_stats < 1000
    assert len(msgpack.unpackb(reply[0])) >= 4
