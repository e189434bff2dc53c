"""A rank whose hello the header check refused for a field's type is named as refused, not as
one that never said hello.

Once ``build`` and ``incarnation`` were type-checked with every other field, a hello whose
incarnation was no list was refused before the shard heard it: the rank waiting for it was
told ``rank 1 (which never said hello)``, sending its operator looking for a worker that had
started, where a list of the wrong entries said ``whose hello was refused: malformed, as this
shard's log says`` (docs/protocol.md, Timeouts and failures). A real ``distconv pserver`` on
127.0.0.1, a bare socket's hello of rank 1 and a real ``PServerSync`` of rank 0 of 2. Under
CURVE only the rank's own key makes it heard: another rank's key claiming it leaves it "never
said hello" (a real shard served on a thread, keyed sockets).
"""

from __future__ import annotations

import pytest
import zmq
from ps_helpers import insecure_worker, raw_dealer, served, shard_argv, small_net
from test_refusals_name_their_cause import HELLO

from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.late_ranks import RanksLate
from distconv.sync.ps.server import Shard
from distconv.sync.ps.wire import pack, unpack_header

#: the shard's --timeout and the worker's: each of the job check's rounds lasts it
TIMEOUT = 0.3


def _refused_hello(endpoint: str, fields: dict) -> str:
    """The shard's refusal of rank 1's hello (of a worker's run) with ``fields``."""
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    try:
        raw.send_multipart(pack({**HELLO, "run": 77, **fields}))
        assert raw.poll(10_000), "no reply to the hello within 10 s"
        return unpack_header(raw.recv_multipart()[0], request=False)["error"]
    finally:
        raw.close(0)
        ctx.term()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "fields, said",
    [
        ({"incarnation": "0123 1"}, "header field 'incarnation' has type str"),
        ({"build": 5}, "header field 'build' has type int"),
        ({"incarnation": ["", 1]}, "hello: incarnation ['', 1] is not [launch, restart]"),
    ],
    ids=["incarnation-no-list", "build-no-string", "incarnation-entries"],
)
def test_a_rank_whose_hello_was_refused_for_a_type_is_named_refused(shards, tmp_path, fields, said):
    argv = shard_argv(["-m", "distconv"], workers=2, timeout=TIMEOUT)
    endpoint = shards.launch(argv, tmp_path / "shard0.log")
    assert _refused_hello(endpoint, fields).startswith(said)
    sync = insecure_worker([endpoint], rank=0, world=2, timeout=TIMEOUT)
    try:
        with pytest.raises(RanksLate) as stopped:
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    words = str(stopped.value)
    assert "rank 1 (whose hello was refused: malformed, as this shard's log says)" in words, words
    assert "never said hello" not in words, words


def _keyed_reply(ctx: zmq.Context, endpoint: str, job_keys: str, key_of: int, head: dict) -> dict:
    """The shard's reply to ``head`` sent with rank ``key_of``'s CURVE key."""
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    keyfiles.curve_client(sock, keyfiles.worker_keys(job_keys, key_of))
    sock.connect(f"tcp://{endpoint}")
    try:
        sock.send_multipart(pack(head))
        assert sock.poll(10_000), f"no reply to {head['op']} within 10 s"
        return unpack_header(sock.recv_multipart()[0], request=False)
    finally:
        sock.close(0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "key_of, named",
    [
        (1, "whose hello was refused: malformed, as this shard's log says"),
        (0, "which never said hello"),
    ],
    ids=["its-own-key", "another-rank-s-key"],
)
def test_under_curve_only_the_rank_s_own_key_makes_its_mistyped_hello_heard(
    job_keys, key_of, named
):
    """Rank 0's key may not make rank 1 look heard: its waiting ranks would be sent to a log
    line of a hello rank 1's worker never sent."""
    config = ShardConfig(bind="127.0.0.1:0", workers=2, keys_dir=job_keys, timeout=TIMEOUT)
    with served(Shard(config)) as shard, zmq.Context() as ctx:
        mistyped = {**HELLO, "run": 5, "incarnation": "0123 1"}
        said = _keyed_reply(ctx, shard.endpoint, job_keys, key_of, mistyped)["error"]
        assert said.startswith("header field 'incarnation' has type str"), said
        hello = {**HELLO, "id": 2, "rank": 0, "run": 6}
        assert _keyed_reply(ctx, shard.endpoint, job_keys, 0, hello)["op"] == "ok"
        gather = {"op": "gather", "id": 3, "job": "local", "rank": 0, "run": 6}
        gather.update(tag="all_equal:1", value=None)
        words = _keyed_reply(ctx, shard.endpoint, job_keys, 0, gather)["error"]
    assert words.startswith(f"rank 1 ({named}) sent nothing for all_equal:1"), words
