"""A rank whose hello the header check refused for a field's type is named as refused, not as
one that never said hello.

Once ``build`` and ``incarnation`` were type-checked with every other field, a hello whose
incarnation was no list was refused before the shard heard it: the rank waiting for it was
told ``rank 1 (which never said hello)``, sending its operator looking for a worker that had
started, where a list of the wrong entries said ``whose hello was refused: malformed, as this
shard's log says`` (docs/protocol.md, Timeouts and failures). A real ``distconv pserver`` on
127.0.0.1, a bare socket's hello of rank 1 and a real ``PServerSync`` of rank 0 of 2.
"""

from __future__ import annotations

import pytest
import zmq
from ps_helpers import insecure_worker, raw_dealer, shard_argv, small_net
from test_refusals_name_their_cause import HELLO

from distconv.sync.ps.late_ranks import RanksLate
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
