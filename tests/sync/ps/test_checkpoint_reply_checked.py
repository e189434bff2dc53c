"""A shard's answer to ``checkpoint`` is checked for the path of the part it wrote.

``save_remote_parts`` took ``reply["path"]`` as it came: a reply without it failed with a bare
``KeyError: 'path'`` naming no shard, and one whose path was no string (a number, a list) went
into the checkpoint's list of parts unchecked, to fail at the resume that read it. Such a reply
is refused as malformed, naming the shard. The shard is a real shard process, with a
``--checkpoint-dir``, whose checkpoint replies are tampered with.
"""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, shard_argv, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose checkpoint replies have no ``path`` (argv[1] ``none``), the
#: path as a number (``number``), or instead of it why none was written as a number
#: (``unwritten``)
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

fault = sys.argv.pop(1)
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "checkpoint" and "path" in fields:
        if fault == "none":
            del fields["path"]
        elif fault == "unwritten":  # why no part was written, as no string
            del fields["path"]
            fields["unwritten"] = 7
        else:
            fields["path"] = 7
    return reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fault", ["none", "number", "unwritten"])
def test_a_checkpoint_reply_without_a_path_string_is_refused(shards, tmp_path, fault):
    argv = shard_argv(["-c", TAMPERED_SHARD, fault]) + ["--checkpoint-dir", str(tmp_path / "p")]
    endpoint = shards.launch(argv, tmp_path / "shard.log")
    sync = insecure_worker([endpoint], timeout=10)
    try:
        sync.setup(small_net().parameters())
        with pytest.raises(SyncError) as refused:
            sync.save_remote_parts(3)
    finally:
        sync.close()
    said = str(refused.value)
    assert "malformed reply from a pserver: checkpoint reply without the path" in said, said
    assert said.endswith(f"(pserver shard 0 ({endpoint}))"), said
    assert any((tmp_path / "p").iterdir())  # the shard did write its part
