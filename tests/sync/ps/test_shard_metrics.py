"""A shard's ``/metrics`` serves its own stats, and none of a worker's series: it registered a
worker's and set only ``distconv_ready`` and ``distconv_step``, so it served
``distconv_bytes_pushed_total{role="server"} 0``, ``distconv_samples_total 0`` and empty
histograms (a shard moving nothing, to a dashboard), while its stats (bytes in and out, pushes,
drops, staleness) were in its log line alone. Real shards and real workers on 127.0.0.1, the
scrape parsed with prometheus_client's parser and compared with the shard's ``stats`` reply."""

from __future__ import annotations

import threading
import time

import pytest
import zmq
from ps_helpers import batches, insecure_worker, raw_dealer, run_ranks, small_net, train_steps

from distconv.service import ServiceEndpoints
from distconv.sync.ps.async_updates import staleness_counts
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.state import Stats
from distconv.sync.ps.stats_series import StatsSnapshots, export_stats
from distconv.sync.ps.wire import pack, unpack_header
from tests.probes import metric_families, shard_probe_port

STEPS = 4
#: what every shard serves, beside nothing of a worker's
SHARD_SERIES = {
    "distconv_ready",
    "distconv_step",
    "distconv_shard_bytes_in",
    "distconv_shard_bytes_out",
    "distconv_shard_push_messages",
    "distconv_shard_gradients_accepted",
    "distconv_shard_updates",
    "distconv_shard_update_seconds",
    "distconv_shard_errors",
    "distconv_shard_refused_connections",
}
#: what an async shard serves besides, the staleness rule's
ASYNC_SERIES = {
    "distconv_shard_stale_gradients_dropped",
    "distconv_shard_push_messages_applied",
    "distconv_shard_push_messages_dropped",
    "distconv_shard_updates_by_staleness",
}
#: the stats field of each ``distconv_shard_`` counter
FIELDS = {
    "bytes_in": "bytes_in",
    "bytes_out": "bytes_out",
    "push_messages": "push_messages",
    "gradients_accepted": "pushes",
    "updates": "updates",
    "update_seconds": "update_seconds",
    "errors": "errors",
    "refused_connections": "refused_connections",
    "stale_gradients_dropped": "drops",
    "push_messages_applied": "push_messages_applied",
    "push_messages_dropped": "push_messages_dropped",
}


def _served(port: int) -> tuple[dict[str, float], dict[str, float], set[str]]:
    """The shard's counters by stats field, its updates by staleness label, and the names of
    every family it serves (the ``_created`` the client adds to its own counters apart); each
    series labelled ``role="server"``, ``rank="0"``."""
    families = metric_families(port)
    counters, by_staleness = {}, {}
    for family in families.values():
        for sample in family.samples:
            assert (sample.labels["role"], sample.labels["rank"]) == ("server", "0"), sample
            short = sample.name.removeprefix("distconv_shard_").removesuffix("_total")
            if "staleness" in sample.labels:
                by_staleness[sample.labels["staleness"]] = sample.value
            elif short in FIELDS:
                counters[FIELDS[short]] = sample.value
    return counters, by_staleness, {n for n in families if not n.endswith("_created")}


def _stats_and_reply_bytes(endpoint: str) -> tuple[dict, int]:
    """The shard's ``stats`` reply (its counters as it handled the request), asked on a socket
    of our own, and the bytes of that reply, which its ``bytes_out`` counts after it."""
    ctx = zmq.Context()
    sock = raw_dealer(ctx, endpoint)
    try:
        sock.send_multipart(pack({"op": "stats", "id": 1, "job": "local", "rank": 0}))
        assert sock.poll(20_000), "the shard did not answer stats within 20 s"
        frames = sock.recv_multipart()
    finally:
        sock.close(0)
        ctx.term()
    header = unpack_header(frames[0], request=False)
    assert header["op"] == "ok", header
    return header["stats"], sum(len(f) for f in frames)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_shard_serves_its_stats_and_no_worker_series(shards, mode):
    extra = ["--health-port", "0", *(["--max-staleness", "1"] if mode == "async" else [])]
    # an async worker beats every quarter of the shard's timeout: none within this test
    extra += ["--timeout", "600"]
    (endpoint,) = shards.start(1, workers=2, mode=mode, extra=extra)
    port = shard_probe_port(shards.log_text())
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2) for r in range(2)]
    try:

        def train(rank: int) -> None:
            syncs[rank].setup(nets[rank].parameters())
            train_steps(nets[rank], syncs[rank], batches(STEPS, 8), rank, 2)

        run_ranks(train, 2)
        # the workers stay open: no bye comes between the stats reply and the scrape
        stats, reply_bytes = _stats_and_reply_bytes(endpoint)
        counters, by_staleness, names = _served(port)
        pushes = [s.traffic() for s in syncs]
    finally:
        for sync in syncs:
            sync.close()
    expected = SHARD_SERIES | (ASYNC_SERIES if mode == "async" else set())
    assert names == expected  # no distconv_samples, bytes_pushed, histograms, restarts
    # the stats request counted in bytes_in before its reply was made; its reply after it
    assert counters == {
        **{f: stats[f] for f in FIELDS.values() if f in counters and f in stats},
        "bytes_out": stats["bytes_out"] + reply_bytes,
        "refused_connections": 0,  # counted beside the stats, not in their reply
    }
    async_fields = {"drops", "push_messages_applied", "push_messages_dropped"}
    assert set(counters) == set(FIELDS.values()) - (set() if mode == "async" else async_fields)
    params = len(nets[0].parameters())
    assert counters["pushes"] == 2 * STEPS * params  # every worker pushes every parameter
    assert counters["bytes_in"] > 0 and counters["update_seconds"] > 0
    assert counters["errors"] == 0
    if mode == "sync":
        assert counters["updates"] == STEPS * params  # one per parameter and step
        assert by_staleness == {}
    else:
        assert counters["updates"] + counters["drops"] == 2 * STEPS * params
        assert by_staleness == dict(zip(("0", "1"), stats["updates_by_staleness"], strict=True))
        assert sum(by_staleness.values()) == counters["updates"]
        applied = sum(p["push_messages_applied"] for p in pushes)
        dropped = sum(p["push_messages_dropped"] for p in pushes)
        assert (counters["push_messages_applied"], counters["push_messages_dropped"]) == (
            applied,
            dropped,
        )
        assert applied + dropped == counters["push_messages"]


@pytest.mark.timeout(60)
def test_a_shards_counters_go_on_through_a_new_run_of_the_job(shards):
    """A new run of the job seeds the shard again; its stats, since the shard started, go on
    from the run before's, as counters must (Prometheus reads a drop as a restart)."""
    (endpoint,) = shards.start(1, workers=1, extra=["--health-port", "0"])
    port = shard_probe_port(shards.log_text())
    served = []
    for run in range(2):
        net, sync = small_net(seed=run), insecure_worker([endpoint])
        try:
            sync.setup(net.parameters())
            train_steps(net, sync, batches(STEPS, 8))
            served.append(_served(port)[0])
        finally:
            sync.close()
    first, second = served
    assert all(second[f] >= first[f] for f in first), (first, second)
    assert second["bytes_in"] > first["bytes_in"]  # the second seed's and steps' requests
    params = len(small_net().parameters())
    assert second["updates"] - first["updates"] == STEPS * params
    assert second["pushes"] - first["pushes"] == STEPS * params


def test_a_scrape_reads_the_stats_of_the_loops_next_turn():
    """The copy is made on the serving thread, between two requests: a scrape asks and waits
    for it; where the loop does not turn within the wait, the last copy; after the loop, the
    stats it left, at once."""
    stats = Stats()
    snapshots = StatsSnapshots(stats.as_dict, wait_seconds=0.3)
    stats.updates = 5  # counted after the copy the snapshots began with
    began = time.monotonic()
    assert snapshots.latest()["updates"] == 0  # no turn came: the last copy
    assert time.monotonic() - began >= 0.25  # it waited for a turn
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.01):
            snapshots.turn()

    turning = threading.Thread(target=loop)
    turning.start()
    try:
        assert snapshots.latest()["updates"] == 5
        stats.updates = 6
        assert snapshots.latest()["updates"] == 6
    finally:
        stop.set()
        turning.join()
    stats.updates = 7
    snapshots.close()
    began = time.monotonic()
    assert snapshots.latest()["updates"] == 7
    assert time.monotonic() - began < 0.25  # no turn awaited


def test_endpoints_without_worker_series_serve_none_and_refuse_counts():
    """A shard's endpoints (``worker_series=False``) serve its readiness and step alone; a
    worker's count made there would be lost unseen, so it is refused."""
    with ServiceEndpoints(role="server", rank=0, worker_series=False) as service:
        port = service.start()
        service.set_ready()
        service.beat(3)
        families = metric_families(port)
        for count in (
            lambda: service.observe_step(0.1, 8, 4),
            lambda: service.add_bytes(10, 10),
            lambda: service.record_totals({"bytes_pushed": 10}),
            lambda: service.set_restarts(1),
        ):
            with pytest.raises(RuntimeError, match="serve no worker series"):
                count()
    assert set(families) == {"distconv_ready", "distconv_step"}
    assert families["distconv_step"].samples[0].value == 3
    assert families["distconv_ready"].samples[0].value == 1


def test_the_loop_copies_the_stats_only_when_a_scrape_asks():
    """While nobody scrapes, a turn of the serving loop reads one attribute and copies nothing
    (the loop turns once per batch of requests); a scrape costs it one copy, at one turn."""
    stats = Stats()
    copies = []

    def take() -> dict:
        copies.append(threading.current_thread())
        return stats.as_dict()

    snapshots = StatsSnapshots(take, wait_seconds=20)
    for _ in range(1000):
        snapshots.turn()
    assert copies == [threading.current_thread()]  # the first, at construction: no other
    stats.updates = 3
    got = []
    scrape = threading.Thread(target=lambda: got.append(snapshots.latest()))
    scrape.start()
    while scrape.is_alive():  # the loop turns until the scrape is answered
        snapshots.turn()
        scrape.join(0.001)
    assert got[0]["updates"] == 3
    for _ in range(1000):
        snapshots.turn()
    assert copies == [threading.current_thread()] * 2  # the scrape's, on the loop's thread


@pytest.mark.parametrize(
    ("max_staleness", "labels"),
    [
        (0, ["0"]),
        (64, [*map(str, range(65))]),  # every update applied is 64 or less stale: "64", no more
        (65, [*map(str, range(64)), "64+"]),  # the last counts 64 and 65: "64+"
    ],
)
def test_the_staleness_labels_end_at_the_bound(max_staleness, labels):
    """An async shard's updates by staleness, as its /metrics serves them: one label per
    staleness up to its bound, the last ``64+`` only where the bound is above 64 (that entry
    counts every update 64 or more stale); none in sync mode."""
    served = {}
    for mode in ("sync", "async"):
        extra = {"max_staleness": max_staleness} if mode == "async" else {}
        config = ShardConfig(bind="127.0.0.1:0", insecure=True, mode=mode, **extra)
        stats = Stats(updates_by_staleness=staleness_counts(config))
        with ServiceEndpoints(role="server", rank=2, worker_series=False) as service:
            port = service.start()
            export_stats(stats, config, service).close()  # the loop's last copy: no turn awaited
            served[mode] = metric_families(port)
    assert "distconv_shard_updates_by_staleness" not in served["sync"]
    family = served["async"]["distconv_shard_updates_by_staleness"]
    assert [s.labels["staleness"] for s in family.samples] == labels
    assert {(s.labels["role"], s.labels["rank"]) for s in family.samples} == {("server", "2")}
