"""A rank that never joins the job, as the worker waiting for it in setup reads its shard's
refusal: the rank was named "(host unknown host, last step none)", the shard's fallback for a
host it never learnt, as if a host were called that. It is now named by why the shard knows no
host: it never said hello, or its hello was refused. Real shard process, real sockets."""

from __future__ import annotations

import pytest
import zmq
from ps_helpers import insecure_worker, raw_dealer, small_net

from distconv.sync.peers import PeerFailed
from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.wire import pack, unpack_header

pytestmark = pytest.mark.timeout(60)

#: the shards' --timeout and the worker's (which then waits 1.5 x as long: the shard speaks)
TIMEOUT = 1.0


def _setup_refusal(endpoint: str) -> str:
    """What rank 0's setup is told when rank 1 does not join its job check."""
    sync = insecure_worker([endpoint], rank=0, world=2, timeout=TIMEOUT)
    try:
        with pytest.raises(PeerFailed) as raised:
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    return str(raised.value)


def test_a_rank_that_never_said_hello_is_named_so(shards):
    (endpoint,) = shards.start(1, 2, extra=["--timeout", str(TIMEOUT)])
    said = _setup_refusal(endpoint)
    assert "rank 1 (which never said hello) sent nothing for all_equal:1" in said, said
    assert "unknown host" not in said, said
    # the gather named by what it is, not by the shard's key of it ("(gather:all_equal:1)")
    assert "all_equal:1 (setup's job check) within 1 s" in said, said
    assert "gather:" not in said, said


def _refused_hello(endpoint: str, **changed: object) -> str:
    """Rank 1 says a hello (``changed``: its fields changed) that the shard refuses, and never
    comes again: what rank 0's setup is told."""
    ctx = zmq.Context()
    try:
        rank1 = raw_dealer(ctx, endpoint)
        hello = {"op": "hello", "id": 1, "job": "local", "rank": 1, "host": "h", "run": 3}
        rank1.send_multipart(pack({**hello, **hello_fields({}), **changed}))
        assert rank1.poll(5000), "the shard did not answer rank 1's hello"
        assert unpack_header(rank1.recv(), request=False)["op"] == "error"
        said = _setup_refusal(endpoint)
        rank1.close()
    finally:
        ctx.term()
    return said


def test_a_rank_whose_hello_was_refused_is_named_so(shards):
    (endpoint,) = shards.start(1, 2, extra=["--timeout", str(TIMEOUT)])
    said = _refused_hello(endpoint, host="h\t")
    assert "rank 1 (whose hello was refused for its host) sent nothing for all_equal:1" in said, (
        said
    )


def test_a_rank_whose_hello_was_malformed_is_named_so(shards):
    """A hello whose job digest is malformed is refused before its host is taken: its rank was
    named as one that never said hello. The shard's log says what was malformed."""
    (endpoint,) = shards.start(1, 2, extra=["--timeout", str(TIMEOUT)])
    said = _refused_hello(endpoint, digest="not-hex")
    assert (
        "rank 1 (whose hello was refused: malformed, as this shard's log says) sent nothing for "
        "all_equal:1" in said
    ), said
    assert "hello: digest 'not-hex' is not 16 lowercase hex digits" in shards.log_text()
