"""Gathers a shard refuses, on every rank or the sender, instead of holding them to fail the job
or answering what no worker can read. A real shard, bare sockets.

- A reply over the header cap: each rank's value fits its own request's 1 MiB header, but the
  reply carries every rank's value in one header: 2 ranks gathering 70,000 values got a reply of
  1.26 MB, which each worker refused as ``malformed reply from a pserver: header of 1260040
  bytes exceeds 1048576``, blaming the shard.
- A gather sent to another shard than 0, which no other rank's could meet there.
"""

from __future__ import annotations

import contextlib

import msgpack
import pytest
import zmq
from ps_helpers import raw_dealer

from distconv.sync.ps.wire import MAX_HEADER_BYTES, PROTOCOL_VERSION, pack, unpack_header

pytestmark = pytest.mark.timeout(60)


def _gather_head(rank: int, tag: str) -> dict:
    return {"op": "gather", "id": rank, "job": "local", "rank": rank, "tag": tag}


def _replies(socks: list[zmq.Socket], tag: str, seconds: float = 10) -> list[dict]:
    """Each rank's reply to its gather ``tag``, in rank order."""
    replies = []
    for sock in socks:
        assert sock.poll(int(seconds * 1000)), f"no answer to {tag} within {seconds} s"
        replies.append(unpack_header(sock.recv_multipart()[0], request=False))
    return replies


def _gather(socks: list[zmq.Socket], tag: str, value, each: list | None = None) -> list[dict]:
    """Every rank's gather of ``value`` (rank r's of ``each[r]``, where given) on shard 0, and
    the replies, in rank order."""
    for rank, sock in enumerate(socks):
        sent = value if each is None else each[rank]
        sock.send_multipart(pack({**_gather_head(rank, tag), "value": sent}))
    return _replies(socks, tag)


@contextlib.contextmanager
def _two_ranks(shards):
    """Bare sockets of two ranks on a real shard 0 of two workers; closed after."""
    (endpoint,) = shards.start(1, workers=2)
    ctx = zmq.Context()
    socks = [raw_dealer(ctx, endpoint) for _ in range(2)]
    try:
        yield socks
    finally:
        for sock in socks:
            sock.close(0)
        ctx.term()


def test_a_gather_whose_reply_passes_the_header_cap_is_refused_and_the_next_meets(shards):
    with _two_ranks(shards) as socks:
        many = [1.0] * 70_000  # 630 kB of header each, 1.26 MB together
        assert len(pack({"value": many})[0]) < MAX_HEADER_BYTES
        for rank, reply in enumerate(_gather(socks, "all_equal:1", many)):
            assert reply["op"] == "error" and reply["id"] == rank, reply
            assert reply["error"].startswith(
                "gather 'all_equal:1': the ranks' values together make a reply header of "
            ), reply
            assert f"over the {MAX_HEADER_BYTES} a header may hold" in reply["error"]
        assert "gather 'all_equal:1': the ranks' values together" in shards.log_text()
        # nothing of it stays held: the ranks meet at their next gather
        replies = _gather(socks, "all_equal:2", [1.5, 2.0])
        assert [r["op"] for r in replies] == ["ok", "ok"], replies
        assert replies[0]["values"] == [[1.5, 2.0], [1.5, 2.0]]
        # an allreduce of the same lists is answered with their sum alone
        replies = _gather(socks, "allreduce:3", many)
        assert [r["op"] for r in replies] == ["ok", "ok"], replies
        assert replies[1]["sum"] == [2.0] * 70_000 and "values" not in replies[1]


def test_a_gather_sent_to_another_shard_than_0_is_refused_and_fails_nothing(shards):
    """Only shard 0 holds gathers (docs/protocol.md). Shard 1 held one sent to it, where no
    other rank's could meet it: the next push there failed the job at once, naming a rank
    that trained on as 'at a barrier (barrier:7)'."""
    _, endpoint = shards.start(2, workers=2)
    ctx = zmq.Context()
    sock = raw_dealer(ctx, endpoint)
    try:
        head = {"op": "gather", "id": 5, "job": "local", "rank": 1, "tag": "barrier:7"}
        sock.send_multipart(pack({**head, "value": None}))
        assert sock.poll(10_000), "shard 1 held the gather"
        reply = unpack_header(sock.recv_multipart()[0], request=False)
        assert reply["op"] == "error" and reply["id"] == 5, reply
        assert reply["error"] == "gather 'barrier:7' sent to shard 1: a job's gathers go to shard 0"
        sock.send_multipart(pack({"op": "stats", "id": 6, "job": "local", "rank": 0}))
        assert sock.poll(10_000)
        stats = unpack_header(sock.recv_multipart()[0], request=False)
        assert stats["failed"] is None and stats["stats"]["errors"] == 1, stats
    finally:
        sock.close(0)
        ctx.term()


DIFFERENT = "the ranks sum different numbers of values"
OTHER = "(other code, or another point of the job)"


@pytest.mark.parametrize(
    "values, why",
    [
        ([[1.0, 2.0], [1.0]], f"{DIFFERENT}: rank 0 sent 2, rank 1 sent 1 {OTHER}"),
        ([[1.0, 2.0], [1.0, 2]], "rank 1 sent [1.0, 2] to sum, not a list of floats"),
        ([[1.0], "1.0"], "rank 1 sent '1.0' to sum, not a list of floats"),
        ([None, [1.0]], "rank 0 sent None to sum, not a list of floats"),
    ],
)
def test_an_allreduce_of_lists_that_cannot_be_summed_fails_every_rank_naming_one(
    shards, values, why
):
    """Shard 0 sums an allreduce gather itself (every rank's lists in its reply grew as the
    world squared): lists it cannot add stop every rank with the reason, and the next meets."""
    with _two_ranks(shards) as socks:
        for reply in _gather(socks, "allreduce:1", None, each=values):
            assert reply["op"] == "error" and reply["error"] == f"gather 'allreduce:1': {why}"
        replies = _gather(socks, "allreduce:2", [0.5, -1.0])
        assert [r.get("sum") for r in replies] == [[1.0, -2.0]] * 2, replies


def test_an_allreduce_past_the_float_range_sums_as_the_workers_did_without_a_warning(shards):
    """The workers' float loop made inf of a sum past the range and NaN of inf - inf, silently;
    shard 0's numpy add warned ``RuntimeWarning: overflow encountered in add`` on its stderr,
    a stray pair of lines in its log."""
    inf = float("inf")
    with _two_ranks(shards) as socks:
        each = [[1e308, inf, -0.0], [1e308, -inf, -0.0]]
        for reply in _gather(socks, "allreduce:1", None, each=each):
            assert reply["op"] == "ok", reply
            total = reply["sum"]
            assert total[0] == inf and total[1] != total[1] and str(total[2]) == "0.0", total
        replies = _gather(socks, "allreduce:2", [0.5])  # the shard still serves
        assert [r.get("sum") for r in replies] == [[1.0]] * 2, replies
        assert "Warning" not in shards.log_text() and "encountered" not in shards.log_text()


def test_an_allreduce_of_32_bit_floats_whose_sum_passes_the_header_cap_is_refused(shards):
    """msgpack may carry a request's floats in 32 bits (5 bytes), the shard's sum takes 64
    (9 bytes): two ranks' 200,000 floats, 1 MB of header each, were answered with a sum of
    1.8 MB that each worker refused as malformed, blaming the shard; now every rank is told
    why, and the next gather meets."""
    with _two_ranks(shards) as socks:
        for rank, sock in enumerate(socks):
            head = _gather_head(rank, "allreduce:1")
            head |= {"value": [0.5] * 200_000, "v": PROTOCOL_VERSION, "arrays": []}
            frame = msgpack.packb(head, use_bin_type=True, use_single_float=True)
            assert len(frame) < MAX_HEADER_BYTES
            sock.send_multipart([frame])
        for reply in _replies(socks, "allreduce:1", seconds=20):
            assert reply["op"] == "error", reply
            assert reply["error"].startswith(
                "gather 'allreduce:1': the ranks' sum of 200000 values makes a reply header of "
            ), reply
            assert f"over the {MAX_HEADER_BYTES} a header may hold" in reply["error"]
        assert "the ranks' sum of 200000 values" in shards.log_text()
        replies = _gather(socks, "allreduce:2", [0.5])  # nothing of it stays held
        assert [r.get("sum") for r in replies] == [[1.0]] * 2, replies
