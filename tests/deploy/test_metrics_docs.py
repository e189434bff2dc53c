"""docs/operations.md's list of the ``/metrics`` series against what a rank reports: the bytes
counters said 'a parameter-server worker's payload bytes', but an MPI rank fills them too (its
gradient collectives' bytes, ``MPISync.traffic``), so a dashboard read by the docs took an MPI
job's non-zero series for a misconfiguration."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from distconv.service import ServiceEndpoints
from distconv.sync.ps.async_updates import staleness_counts
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.state import Stats
from distconv.sync.ps.stats_series import export_stats


def _text(service: ServiceEndpoints) -> str:
    return generate_latest(service.registry).decode()


OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"

pytestmark = pytest.mark.timeout(60)


def _metrics_paragraph() -> str:
    text = OPERATIONS.read_text()
    start = text.index("`/metrics` is Prometheus's text format")
    return " ".join(text[start : text.index("\n\n", start)].split())


def _shard_paragraph() -> str:
    text = OPERATIONS.read_text()
    start = text.index("A shard's `/metrics` (`distconv pserver --health-port`)")
    return " ".join(text[start : text.index("\n\n", start)].split())


def test_the_docs_name_every_series_a_shard_reports():
    """An async shard's series (a sync one's are fewer), as its probes serve them with its
    stats; its updates by staleness labelled as the docs say, the last of a bound above 64
    counting every update that stale or more."""
    config = ShardConfig(bind="127.0.0.1:0", insecure=True, mode="async", max_staleness=100)
    stats = Stats(updates_by_staleness=staleness_counts(config))
    with ServiceEndpoints(role="server", rank=0, worker_series=False) as service:
        export_stats(stats, config, service).close()  # the loop's last copy: no turn awaited
        families = list(text_string_to_metric_families(_text(service)))
    names = {f.name + ("_total" if f.type == "counter" else "") for f in families}
    reported = {n for n in names if not n.endswith("_created")}
    assert reported == set(re.findall(r"`(distconv_[a-z_]+)`", _shard_paragraph()))
    (staleness,) = [f for f in families if f.name == "distconv_shard_updates_by_staleness"]
    labels = [s.labels["staleness"] for s in staleness.samples]
    assert labels == [*map(str, range(64)), "64+"]
    assert 'staleness="64+"' in _shard_paragraph()


def test_the_docs_name_every_series_a_rank_reports():
    """The names a query needs: a counter is served with Prometheus's ``_total`` suffix (the
    docs once listed ``distconv_samples``, which a ``rate()`` written from them never found)."""
    with ServiceEndpoints(role="worker", rank=0) as service:
        families = list(text_string_to_metric_families(_text(service)))
    names = {f.name + ("_total" if f.type == "counter" else "") for f in families}
    documented = set(re.findall(r"`(distconv_[a-z_]+)`", _metrics_paragraph()))
    # the parser lists a counter's and a histogram's creation time as a family of its own
    reported = {n for n in names if n.startswith("distconv_") and not n.endswith("_created")}
    assert reported == documented


def test_an_mpi_rank_counts_its_gradient_bytes_as_the_docs_say(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # MPISync's single-rank stand-in
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    from distconv.init import set_seed
    from distconv.models import lenet
    from distconv.optim import create_optimizer
    from distconv.sync.mpi import MPISync
    from distconv.trainer import Trainer

    set_seed(0)
    net = lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)
    rng = np.random.default_rng(0)
    data = {"image": rng.random((32, 1, 8, 8), dtype=np.float32), "label": np.arange(32) % 4}
    sync = MPISync(create_optimizer("sgd"), overlap=False)
    with ServiceEndpoints(role="worker", rank=0) as service:
        try:
            Trainer(net, sync, 8, monitor=service, progress=False).fit(data, epochs=1)
        finally:
            sync.close()
        families = text_string_to_metric_families(_text(service))
        totals = {s.name: s.value for f in families for s in f.samples}
    assert totals["distconv_bytes_pushed_total"] > 0
    assert totals["distconv_bytes_pulled_total"] == totals["distconv_bytes_pushed_total"]
    said = _metrics_paragraph()
    assert "under MPI the bytes its gradient collectives move" in said, said


def test_what_the_job_id_is_said_to_name_carries_it():
    """``distconv train --help`` said --job-id 'names the job in logs and metrics' (and
    ``Runtime.job_id`` 'in logs, metrics and key files'), but no series of /metrics, nor a line
    of metrics.jsonl, carries it: an operator who filtered a dashboard by job id found nothing.
    What the texts name must hold it."""
    from distconv.runtime import Runtime
    from distconv.train_args import train_parser

    (flag,) = [a for a in train_parser()._actions if "--job-id" in a.option_strings]
    with ServiceEndpoints(role="worker", rank=0) as service:
        exported = _text(service)
    for said in (flag.help, Runtime.__doc__.split("job_id:")[1].split("\n")[0]):
        assert "metrics" not in said or "job_id" in exported, said
        assert "logs" in said, said  # the JSON log lines do carry it


#: what the Trainer times into ``collective_seconds`` (distconv.sync.collective_time's
#: callers), each of which a reader of the series must find named
TIMED_COLLECTIVES = (
    "start-up check",
    "stop check",
    "metric sums",
    "test-set sums",
    "checkpoint's barrier",
)


def test_the_collective_seconds_help_names_every_wait_it_counts():
    """``distconv_collective_seconds_total``'s HELP said 'between steps' and named the stop
    check, the metric sums and a checkpoint's barrier, but the series also counts the fit's
    start-up check and the epoch's test-set sums, so it read as larger than what it named (and
    than the sum of ``metrics.jsonl``'s per-rank waits, which leave those out)."""
    with ServiceEndpoints(role="worker", rank=0) as service:
        families = {f.name: f for f in text_string_to_metric_families(_text(service))}
    helped = families["distconv_collective_seconds"].documentation
    said = _metrics_paragraph()
    for wait in TIMED_COLLECTIVES:
        assert wait in helped, (wait, helped)
        assert wait in said, (wait, said)
