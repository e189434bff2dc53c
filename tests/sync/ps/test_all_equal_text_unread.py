"""An all_equal answer whose other rank's description is no JSON map names the two ranks, not a
bare JSONDecodeError (the neighbour of 90ba249's own-value check).

Where the digests differ, the ranks gather two descriptions as JSON texts, and each rank reads
the other's with ``json.loads``. A foreign or tampered answer there (text that is no JSON, or
JSON that is no map) failed setup with a bare JSONDecodeError (or AttributeError), naming
neither rank nor the difference; text nested deeper than json.loads recurses (``[[[...``)
still failed with a bare RecursionError. The shard is a real shard process whose
answers to the second all_equal gather replace the other ranks' descriptions with ``{`` (or
another text); the two ranks' seeds differ.
"""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, run_ranks, shard_argv, small_net

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose answers to a gather of descriptions give the other ranks TEXT
TAMPERED_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.server import Shard

text = sys.argv.pop(1)
reply = Shard._reply

def tampered(self, ident, request, arrays=(), error=None, **fields):
    values = fields.get("values") or []
    if any(type(v) is str and v.startswith("{") for v in values):
        mine = request["rank"]
        fields["values"] = [v if r == mine or v is None else text for r, v in enumerate(values)]
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = tampered
raise SystemExit(main(sys.argv[1:]))
"""

#: JSON nested past the interpreter's recursion limit: json.loads raises RecursionError
DEEP = "[" * 5000


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text", ["{", "[1, 2]", DEEP], ids=["open", "list", "deep"])
def test_a_description_answered_as_no_json_map_names_the_ranks(shards, tmp_path, text):
    endpoint = shards.launch(
        shard_argv(["-c", TAMPERED_SHARD, text], workers=2), tmp_path / "shard.log"
    )

    def rank_fn(rank: int) -> str:
        sync = insecure_worker([endpoint], rank=rank, world=2)
        try:
            sync.setup(small_net().parameters())
            with pytest.raises(SyncError) as refused:
                sync.all_equal({"seed": rank})  # the digests differ: descriptions are gathered
        finally:
            sync.close()
        return str(refused.value)

    for rank, said in enumerate(run_ranks(rank_fn, 2)):
        assert f"rank {rank} and rank {1 - rank} run different jobs: digest " in said, said
        assert "no JSON map" in said, said
