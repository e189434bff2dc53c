"""A shard's ``hello`` reply is checked for the types of the settings a worker lives by, and a
wrong one names the shard.

The worker took ``mode``, ``max_message_bytes`` and ``max_frame_bytes`` as they came: a reply
without ``mode`` (or of another mode) set the worker up in mode None, which no check read as
sync (a sparse push's reply was then held to the rows pushed alone), without a word; a cap that
was a string failed the first size check with a bare TypeError naming no shard; a cap of 0
blamed the layout (``a block needs N bytes ... more than the 0 of --max-message-bytes``); and a
``shard`` of ``false`` passed for shard 0. The shard is a real shard process whose hello reply
is tampered with.
"""

from __future__ import annotations

import pytest
from ps_helpers import assert_malformed_reply, insecure_worker, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose hello reply has field argv[1] set to the JSON argv[2] (``drop``:
#: left out)
TAMPERED_SHARD = """
import json, sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

key, value = sys.argv.pop(1), sys.argv.pop(1)
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "hello" and not error:
        if value == "drop":
            del fields[key]
        else:
            fields[key] = json.loads(value)
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""
CASES = {
    ("mode", "drop"): "hello reply: mode None, not one of ['sync', 'async']",
    ("mode", '"both"'): "hello reply: mode 'both', not one of ['sync', 'async']",
    ("max_message_bytes", '"1024"'): "hello reply: max_message_bytes '1024' is not a positive",
    ("max_message_bytes", "0"): "hello reply: max_message_bytes 0 is not a positive integer",
    ("max_frame_bytes", "1.5"): "hello reply: max_frame_bytes 1.5 is not a positive integer",
    ("shard", "false"): "hello reply: shard False is not an integer",
    ("build", "5"): "header field 'build' has type int",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("key", "value"), sorted(CASES))
def test_a_hello_reply_of_the_wrong_types_names_its_shard(shards, key, value):
    endpoint = shards.tampered(TAMPERED_SHARD, key, value)
    sync = insecure_worker([endpoint])
    try:
        with pytest.raises(SyncError) as refused:
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    assert_malformed_reply(refused.value, CASES[key, value], endpoint)
