"""A scrape of a shard whose serving loop is held (a long request: a checkpoint part written to
slow storage) is answered after the wait for the loop's next turn, with the copy of the stats
it made last, and the probes answer meanwhile: the scrape runs on the probe server's thread and
never waits for the loop past that wait. A real shard process, one of whose ``stats`` requests
holds its loop (the one fault a test cannot bring about otherwise, on any machine)."""

from __future__ import annotations

import threading
import time
import urllib.request

import pytest
import zmq
from ps_helpers import raw_dealer, shard_argv

from distconv.sync.ps.stats_series import WAIT_SECONDS
from distconv.sync.ps.wire import pack
from tests.probes import metric_families, shard_probe_port

#: seconds the tampered request holds the loop: well past the scrape's wait
HOLD = 2 * WAIT_SECONDS
#: ``python -m distconv`` whose ``stats`` request of id 99 holds the loop HOLD s once answered
HELD_SHARD = f"""
import sys, time
import msgpack
from distconv.cli import main
from distconv.sync.ps.server import Shard

handle = Shard.handle

def held(self, frames):
    handle(self, frames)
    if msgpack.unpackb(frames[1].bytes).get("id") == 99:
        time.sleep({HOLD})

Shard.handle = held
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(60)
def test_a_scrape_of_a_held_loop_serves_the_last_copy(shards):
    argv = shard_argv(["-c", HELD_SHARD]) + ["--health-port", "0"]
    endpoint = shards.launch(argv, shards.tmp_path / "held.log")
    port = shard_probe_port(shards.log_text())
    before = metric_families(port)["distconv_shard_bytes_in"].samples[0].value
    ctx = zmq.Context()
    sock = raw_dealer(ctx, endpoint)
    try:
        sock.send_multipart(pack({"op": "stats", "id": 99, "job": "local", "rank": 0}))
        assert sock.poll(20_000), "the shard did not answer stats within 20 s"
        sock.recv_multipart()  # answered: the loop is held from now on, for HOLD s
        held_since = time.monotonic()
        health = []
        probe = threading.Thread(target=lambda: health.append(_get(port, "/healthz")))
        probe.start()
        during = metric_families(port)["distconv_shard_bytes_in"].samples[0].value
        waited = time.monotonic() - held_since
        probe.join()
    finally:
        sock.close(0)
        ctx.term()
    # the copy made before the request, which the held loop has counted but not copied
    assert (before, during) == (0, 0), (before, during)
    assert WAIT_SECONDS * 0.9 <= waited < HOLD, waited
    # /healthz answers while the loop is held, as ok: a stall is one past --stall-seconds
    assert health[0].startswith("ok: server 0"), health
    time.sleep(max(0.0, held_since + HOLD - time.monotonic()))  # the loop turns again
    after = metric_families(port)["distconv_shard_bytes_in"].samples[0].value
    assert after > 0  # the stats request, counted


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
        return reply.read().decode()
