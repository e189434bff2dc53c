"""A part refused by a file size limit (``EFBIG``, ``RLIMIT_FSIZE``) prunes nothing: it is no
full disk, and no file deleted makes that part fit, so the old parts a prune would have taken
stay (the full disk's prune: tests/sync/ps/test_parts_full_disk.py). A real shard under a real
``ulimit -f``; no mount needed, so this runs where that module is skipped."""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, shard_argv, small_net

#: ``sh -c LIMITED sh ARGV``: ARGV run with files of at most 16 blocks of 512 bytes (8 KiB, the
#: unit POSIX gives ``ulimit -f``): more than the shard's log (about 2 KiB), less than its part
#: (about 15 KiB)
LIMITED = 'ulimit -f 16 && exec "$@"'


@pytest.mark.timeout(60)
def test_a_file_size_limit_prunes_no_part(shards, tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    rolled_back = parts / "pserver-shard0-step99.safetensors"  # a prune of step 10 takes it
    rolled_back.write_text("x")
    argv = shard_argv(["-m", "distconv"], shard=0, shards=1) + ["--checkpoint-dir", str(parts)]
    endpoint = shards.launch(["sh", "-c", LIMITED, "sh", *argv], tmp_path / "shard.log")
    net, sync = small_net(), insecure_worker([endpoint], optimizer="adam")
    try:
        sync.setup(net.parameters())
        assert sync.save_remote_parts(10, keep=5) == {}
        kept = sorted(p.name for p in parts.iterdir())
    finally:
        sync.close()
        shards.stop()
    assert kept == [rolled_back.name], kept
    log_text = shards.log_text()
    assert "-step10.safetensors: file too large" in log_text, log_text
    assert "pruned" not in log_text and "Traceback" not in log_text, log_text
