"""The ``distconv_`` series a rank's ``/metrics`` serves (:mod:`distconv.service`), each
labelled with the rank's ``role`` and ``rank``, in the registry of its probes."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

#: what ``distconv_step`` says before the first step, and after ``forget_step``
NO_STEP = -1

#: step and allreduce durations span milliseconds (tiny models) to minutes (large ones)
_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


#: the series a rank without the worker's sets: a shard's readiness and last step
PROBE_SERIES = ("distconv_step", "distconv_ready")


class RankSeries:
    """The ``distconv_`` series of one rank, in their own registry: a worker's all, else
    (``worker`` false: a shard, which counts no steps nor traffic of a worker's) those of
    :data:`PROBE_SERIES` alone, every other attribute None. A series served but never set read
    as a measurement: a shard's ``distconv_bytes_pushed_total 0`` as a shard moving nothing."""

    def __init__(
        self, registry: CollectorRegistry, role: str, rank: int, worker: bool = True
    ) -> None:
        labels = ("role", "rank")
        values = {"role": role, "rank": str(rank)}
        self.worker = worker

        def make(kind, name: str, doc: str, **kwargs):
            if not worker and name not in PROBE_SERIES:
                return None
            return kind(name, doc, labels, registry=registry, **kwargs).labels(**values)

        self.samples = make(Counter, "distconv_samples", "Examples trained by this rank.")
        self.samples_per_second = make(
            Gauge, "distconv_samples_per_second", "This rank's throughput in the last step."
        )
        self.step_seconds = make(
            Histogram,
            "distconv_step_seconds",
            "Wall time of one training step.",
            buckets=_SECONDS_BUCKETS,
        )
        self.step = make(Gauge, "distconv_step", "The last step that made progress (-1: none yet).")
        self.step.set(NO_STEP)  # step 0 is a step: a fresh gauge's 0 would claim it
        self.bytes_pushed = make(
            Counter, "distconv_bytes_pushed", "Payload bytes sent (gradients, seeds)."
        )
        self.bytes_pulled = make(
            Counter, "distconv_bytes_pulled", "Payload bytes received (parameter values)."
        )
        self.allreduce_seconds = make(
            Histogram,
            "distconv_allreduce_seconds",
            "Wall time of one step's exchange (the time it waited: finish_step, under MPI its "
            "check in backward too).",
            buckets=_SECONDS_BUCKETS,
        )
        self.stale_dropped = make(
            Counter,
            "distconv_stale_gradients_dropped",
            "Gradients dropped for exceeding the staleness bound (asynchronous mode), one per "
            "parameter and shard.",
        )
        self.push_messages_applied = make(
            Counter,
            "distconv_push_messages_applied",
            "Asynchronous push messages the shards applied (some parameter of, or all).",
        )
        self.push_messages_dropped = make(
            Counter,
            "distconv_push_messages_dropped",
            "Asynchronous push messages the shards dropped whole as too stale.",
        )
        self.collective_seconds = make(
            Counter,
            "distconv_collective_seconds",
            "Seconds waited in the Trainer's collectives outside the steps' exchange, where a "
            "rank waits for a slower one: the fit's start-up check, the stop check, each epoch's "
            "metric sums and test-set sums, each checkpoint's barrier.",
        )
        self.restarts = make(Gauge, "distconv_restarts", "Times the job was restarted.")
        self.ready = make(Gauge, "distconv_ready", "1 once the parameters are in place.")
