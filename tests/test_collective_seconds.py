"""Each epoch's record says how long the ranks waited in the Trainer's collectives between
steps (``collective_seconds``, ``collective_seconds_per_rank``), for every sync, and
``traffic()`` and ``/metrics`` keep the running total where there are several ranks. Before,
nothing did: an asynchronous worker waiting at the stop check for a slower one read 0.04 s of
``sync_seconds`` against 0.58 s of epoch. Here one process (LocalSync): the waits are the
epoch's metric sums alone, and its ``traffic()`` stays empty, as a script reads it."""

from __future__ import annotations

import pytest

from distconv.data import synthetic
from distconv.metrics import read_metrics, summary
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.service import ServiceEndpoints
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer


def served_collective_seconds(service: ServiceEndpoints) -> float:
    """What ``/metrics`` says of ``distconv_collective_seconds_total``."""
    labels = {"role": service.role, "rank": str(service.rank)}
    return service.registry.get_sample_value("distconv_collective_seconds_total", labels)


@pytest.mark.timeout(60)
def test_a_local_run_records_its_collective_seconds_each_epoch_and_in_all(tmp_path):
    sync = LocalSync(create_optimizer("sgd", lr=0.05))
    monitor = ServiceEndpoints()  # not served: its counters are read here
    net = lenet((1, 8, 8), num_classes=4, channels=(2, 3), hidden=8)
    trainer = Trainer(net, sync, 16, out_dir=tmp_path / "run", progress=False, monitor=monitor)
    history = trainer.fit(synthetic(n=64, num_classes=4, seed=1), epochs=2)
    lines = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [line["collective_seconds_per_rank"] for line in lines] == [
        [r["collective_seconds"]] for r in history
    ]
    waits = [line["collective_seconds"] for line in lines]
    assert all(0 < w < line["seconds"] for w, line in zip(waits, lines))
    assert sync.collective_seconds > sum(waits)  # and the rates' sums after each
    # a rank alone waits for none: its traffic() keeps no total (a script reading any count
    # there as a transport's would print one), and /metrics counts none
    assert sync.traffic() == {}
    assert served_collective_seconds(monitor) == 0
    # nor does its epoch's log line say it waited: "0.0s waiting in collectives" at each epoch
    # of the main job said nothing but noise
    said = summary(history[0], 2)
    assert "waiting" not in said and f"{history[0]['seconds']:.1f}s  " in said
