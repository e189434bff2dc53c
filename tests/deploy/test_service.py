"""The probes and metrics over real HTTP on a port-0 server, asked with a target in origin or
absolute form, as HTTP demands a server answer both."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from distconv.service import ServiceEndpoints
from tests.child_env import child_env
from tests.probes import WORKER_PROBES, held_port


def get(port: int, path: str) -> tuple[int, str]:
    """Status and body of GET http://127.0.0.1:port/path (errors are answers too)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _started(stall_seconds: float):
    svc = ServiceEndpoints(role="worker", rank=3, stall_seconds=stall_seconds)
    svc.port = svc.start()
    return svc


@pytest.fixture
def service():
    """Endpoints whose stall limit is far off: a busy machine (four test workers on two CPUs)
    paused a test longer than half a second between its beat and its request, and /healthz
    answered "stalled" where the test expected 200."""
    svc = _started(stall_seconds=60)
    yield svc
    svc.close()


@pytest.fixture
def stalling():
    """Endpoints whose stall limit passes in half a second, for the tests of the stall."""
    svc = _started(stall_seconds=0.5)
    yield svc
    svc.close()


def test_ready_turns_from_false_to_true(service):
    assert get(service.port, "/readyz")[0] == 503
    service.set_ready()
    assert get(service.port, "/readyz") == (200, "ready\n")
    service.set_ready(False)
    assert get(service.port, "/readyz")[0] == 503


@pytest.mark.timeout(30)
def test_health_turns_from_true_to_false_when_steps_stop(stalling):
    service = stalling
    service.beat(7)
    status, body = get(service.port, "/healthz")
    assert status == 200 and "last step 7" in body
    # poll (no fixed sleep assertion): the answer must flip once stall_seconds pass quietly
    deadline = time.monotonic() + 20
    while get(service.port, "/healthz")[0] == 200:
        assert time.monotonic() < deadline, "/healthz never reported the stall"
        time.sleep(0.1)
    status, body = get(service.port, "/healthz")
    assert status == 503 and body.startswith("stalled: worker 3, last step 7")
    service.beat(8)
    assert get(service.port, "/healthz")[0] == 200


@pytest.mark.timeout(30)
def test_a_failed_rank_is_unhealthy_at_once_and_for_good_naming_why(service):
    """The stall limit has not passed, the loop goes on beating, and still
    /healthz answers 503 with the cause, not "ok" and later "stalled"."""
    service.beat(7)
    service.set_ready()
    service.set_failed("job failed: gradient of parameter w from rank 1 is not finite")
    assert get(service.port, "/healthz") == (
        503,
        "failed: worker 3, last step 7: job failed: gradient of parameter w from rank 1 is "
        "not finite\n",
    )
    assert not service.healthy and service.failure.startswith("job failed")
    service.beat(8)  # the loop goes on: the failure stays
    status, body = get(service.port, "/healthz")
    assert status == 503 and body.startswith("failed: worker 3, last step 8: job failed")
    assert get(service.port, "/readyz")[0] == 200  # liveness only: readiness is another matter
    with pytest.raises(ValueError, match="non-empty"):
        service.set_failed(" ")


@pytest.mark.timeout(30)
def test_a_beat_without_a_step_keeps_the_last_one(service):
    service.beat()
    assert "last step none yet" in get(service.port, "/healthz")[1]
    service.beat(5)
    service.beat(None)
    status, body = get(service.port, "/healthz")
    assert status == 200 and body.startswith("ok: worker 3, last step 5, 0.")


@pytest.mark.timeout(60)
def test_a_training_rank_names_the_last_step_it_finished():
    """docs/operations.md: /healthz names the last step a worker finished, as a shard's does,
    and distconv_step is that step; the trainer's beats named none ("last step none yet")."""
    import numpy as np

    from distconv.init import set_seed
    from distconv.models import lenet
    from distconv.optim import create_optimizer
    from distconv.sync.local import LocalSync
    from distconv.trainer import Trainer

    set_seed(0)
    net = lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)
    rng = np.random.default_rng(0)
    data = {"image": rng.random((32, 1, 8, 8), dtype=np.float32), "label": np.arange(32) % 4}
    sync = LocalSync(create_optimizer("sgd"))
    with ServiceEndpoints(role="worker", rank=3) as service:  # no stall on a slow machine
        port = service.start()
        Trainer(net, sync, 8, monitor=service, progress=False).fit(data, epochs=1)
        status, body = get(port, "/healthz")
        assert status == 200 and body.startswith("ok: worker 3, last step 4, "), body
        metrics = get(port, "/metrics")[1]
        assert 'distconv_step{rank="3",role="worker"} 4.0' in metrics, metrics


@pytest.mark.timeout(60)
def test_an_evaluation_longer_than_the_stall_limit_is_no_stall():
    """Only training steps beat, so a test set that took longer than the stall limit to
    evaluate made /healthz answer 503, and a liveness probe could restart a healthy worker.
    Every forward beats now. Here each forward sleeps 0.25 s and the limit is
    0.6 s: the evaluation's 8 batches take 2 s, the training before it 0.5 s."""
    import numpy as np

    from distconv.layers import Activation, FullyConnected, SoftmaxCrossEntropy
    from distconv.network import Network
    from distconv.optim import create_optimizer
    from distconv.sync.local import LocalSync
    from distconv.trainer import Trainer

    class Slow(Activation):
        def _forward(self, x):
            time.sleep(0.25)
            return super()._forward(x)

    net = Network()
    net.add("slow", Slow("linear"), inputs="image")
    net.add("fc", FullyConnected(64, 4), inputs="slow")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
    rng = np.random.default_rng(0)
    data = {"image": rng.random((16, 1, 8, 8), dtype=np.float32), "label": np.arange(16) % 4}
    with ServiceEndpoints(role="worker", rank=3, stall_seconds=0.6) as service:
        port = service.start()
        sync = LocalSync(create_optimizer("sgd"))
        trainer = Trainer(net, sync, 8, monitor=service, progress=False)
        trainer.fit(data, epochs=1)
        trainer.evaluate(data, batch_size=2)
        status, body = get(port, "/healthz")
        assert status == 200 and body.startswith("ok: worker 3, last step 2, "), body


def test_metrics_parse_with_the_prometheus_parser(service):
    service.observe_step(0.5, 64)
    service.observe_step(0.25, 64)
    service.add_bytes(pushed=1000, pulled=250)
    service.add_bytes(pushed=24)
    service.observe_allreduce(0.125)
    service.add_stale_dropped(2)
    service.set_restarts(1)
    service.beat(41)
    service.set_ready()
    status, text = get(service.port, "/metrics")
    assert status == 200
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            assert s.labels.get("role") == "worker" and s.labels.get("rank") == "3", s
            samples[s.name if "le" not in s.labels else (s.name, s.labels["le"])] = s.value
    assert samples["distconv_samples_total"] == 128
    assert samples["distconv_samples_per_second"] == 256.0  # the last step: 64 / 0.25
    assert samples["distconv_step_seconds_count"] == 2
    assert samples["distconv_step_seconds_sum"] == 0.75
    assert samples[("distconv_step_seconds_bucket", "0.25")] == 1
    assert samples["distconv_bytes_pushed_total"] == 1024
    assert samples["distconv_bytes_pulled_total"] == 250
    assert samples["distconv_allreduce_seconds_sum"] == 0.125
    assert samples["distconv_stale_gradients_dropped_total"] == 2
    assert samples["distconv_restarts"] == 1
    assert samples["distconv_step"] == 41
    assert samples["distconv_ready"] == 1


def test_two_instances_in_one_process_do_not_collide():
    with ServiceEndpoints(role="server", rank=0) as a, ServiceEndpoints(role="server", rank=1) as b:
        pa, pb = a.start(), b.start()
        assert pa != pb
        a.add_stale_dropped(5)
        assert 'rank="1"' in get(pb, "/metrics")[1]
        assert (
            'distconv_stale_gradients_dropped_total{rank="1",role="server"} 0.0'
            in (get(pb, "/metrics")[1])
        )


def test_unknown_path_is_404_and_close_frees_the_port(service):
    assert get(service.port, "/nope")[0] == 404
    service.close()
    service.close()  # twice is fine
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{service.port}/readyz", timeout=5)


def test_starting_twice_is_an_error(service):
    with pytest.raises(RuntimeError, match="already serve on port"):
        service.start()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"role": ""}, "role must be a non-empty string"),
        ({"rank": -1}, "rank must be an integer >= 0, got -1"),
        ({"stall_seconds": 0}, "stall_seconds must be > 0, got 0"),
        ({"stall_seconds": float("nan")}, "stall_seconds must be a finite number"),
    ],
)
def test_bad_arguments_name_the_cause(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ServiceEndpoints(**kwargs)


def test_negative_counts_are_refused():
    svc = ServiceEndpoints()
    with pytest.raises(ValueError, match="byte counts must be >= 0"):
        svc.add_bytes(pushed=-1)
    with pytest.raises(ValueError, match="seconds and samples must be >= 0"):
        svc.observe_step(-0.1, 3)


def test_train_closes_the_probes_when_the_transport_cannot_be_built(monkeypatch, caplog):
    """``distconv.job.train`` starts the endpoints, then build_sync raises: the port is freed."""
    monkeypatch.delenv("DISTCONV_PSERVERS", raising=False)

    from distconv.job import TrainConfig, train
    from distconv.runtime import RuntimeConfigError

    config = TrainConfig(data="synthetic", epochs=1, health_port=0, sync="pserver")
    with pytest.raises(RuntimeConfigError, match="needs the servers"):
        train(config)  # no --pservers: the transport refuses
    (said,) = WORKER_PROBES.findall(caplog.text)  # the port the kernel chose, as train logs it
    port = int(said)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # EADDRINUSE if the endpoints still served


@pytest.mark.timeout(30)
@pytest.mark.parametrize("local_rank", [0, 1])
def test_a_port_in_use_is_named(local_rank):
    """`distconv train: error: [Errno 98] Address already in use` named no port, and under the
    launcher the port a rank binds is --health-port + its local rank, not the one typed."""
    from types import SimpleNamespace

    from distconv.job import _start_service

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(OSError, match=f"probes and metrics on 127.0.0.1:{port}: "):
            ServiceEndpoints().start("127.0.0.1", port)
        runtime = SimpleNamespace(role="worker", rank=local_rank, local_rank=local_rank)
        typed = port - local_rank
        with pytest.raises(OSError) as caught:
            _start_service(typed, "127.0.0.1", runtime)
    said = str(caught.value)
    assert f"127.0.0.1:{port}" in said
    assert (f"--health-port {typed} + local rank 1" in said) is (local_rank == 1), said


@pytest.mark.timeout(30)
@pytest.mark.parametrize("port, local_rank", [(65536, 0), (65535, 1)])
def test_a_health_port_past_65535_is_named(port, local_rank):
    """bind() raised OverflowError, a traceback naming no flag: --health-port 65535 under the
    launcher made rank 1 bind 65536, and distconv train took --health-port 70000 as given."""
    from types import SimpleNamespace

    from distconv.job import _start_service

    runtime = SimpleNamespace(role="worker", rank=local_rank, local_rank=local_rank)
    with pytest.raises(OSError) as caught:
        _start_service(port, "127.0.0.1", runtime)
    message = str(caught.value)
    assert f"127.0.0.1:{port + local_rank}: a port is 0..65535" in message
    assert (f"(--health-port {port} + local rank 1)" in message) is (local_rank == 1), message


def _wait_for_handlers(deadline_s: float = 10) -> None:
    """Until no request thread of the stdlib server is alive (they are daemons, which the
    service's own clients and close() do not wait for)."""
    import threading

    deadline = time.monotonic() + deadline_s
    while any("process_request" in t.name for t in threading.enumerate()):
        assert time.monotonic() < deadline, "request threads still running"
        time.sleep(0.02)


@pytest.mark.timeout(60)
def test_a_client_that_hangs_up_leaves_no_traceback_on_stderr(service, capfd, caplog):
    """A probe past its timeoutSeconds (5 s in the manifests) closes its connection: the stdlib
    server printed "Exception occurred during processing of request" and a traceback on
    stderr for each, bare lines in a --log-format json log. Other errors go
    through logging, in the log's format."""
    import struct

    for _ in range(10):  # the reset reaches the server before it answers
        with socket.create_connection(("127.0.0.1", service.port)) as client:
            client.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    _wait_for_handlers()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
    service._health_text = lambda: 1 / 0  # a bug of the handler's, not the client's
    with pytest.raises(OSError):  # the connection closes without an answer
        get(service.port, "/healthz")
    _wait_for_handlers()
    assert "Traceback" not in capfd.readouterr().err
    (record,) = [r for r in caplog.records if r.name == "distconv.service"]
    assert "a request from 127.0.0.1 failed" in record.getMessage() and record.exc_info


@pytest.mark.timeout(60)
def test_a_silent_client_is_dropped(monkeypatch):
    """A connection that never sent its request held a thread and a socket for the process's
    life (no timeout on the handler's socket). This one client is hung up on once
    CLIENT_SECONDS (lowered here) have passed since it connected, not before, and others are
    answered meanwhile. That many such clients cannot use up the process's threads or files
    is test_probe_limits.py's to check (the cap on connections, a training rank flooded)."""

    import distconv.probe_http as probe_http

    monkeypatch.setattr(probe_http, "CLIENT_SECONDS", 0.5)
    with ServiceEndpoints() as svc:
        port = svc.start()
        with socket.create_connection(("127.0.0.1", port)) as silent:
            began = time.monotonic()
            silent.settimeout(10)
            assert get(port, "/readyz")[0] == 503  # others are answered meanwhile
            assert silent.recv(1) == b""  # closed by the server, not by our 10 s
            assert 0.45 <= time.monotonic() - began < 5


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path, status", [("/healthz", 200), ("/readyz", 503), ("/nope", 404)])
def test_head_is_answered_as_get_without_a_body(service, path, status):
    """HEAD got 501 Unsupported method: an uptime checker or load balancer that asks with HEAD
    (RFC 9110: a server must support it) saw every rank as broken."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
    try:
        conn.request("HEAD", path)
        reply = conn.getresponse()
        assert reply.status == status
        assert int(reply.headers["Content-Length"]) > 0 and reply.read() == b""
    finally:
        conn.close()


def _samples(svc: ServiceEndpoints) -> dict[str, float]:
    """Every sample /metrics would show, by name (histogram buckets left out)."""
    text = generate_latest(svc.registry).decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if "le" not in s.labels
    }


def test_totals_of_a_new_strategy_count_on_from_zero():
    """A second Trainer (a new sync strategy) on the same monitor reports totals that start
    again from 0: the difference to the last strategy's was negative and record_totals raised
    ValueError in the new trainer's first step."""
    svc = ServiceEndpoints()
    svc.record_totals({"bytes_pushed": 1000, "bytes_pulled": 400, "sync_seconds": 2.0})
    svc.record_totals({"bytes_pushed": 100, "bytes_pulled": 40, "sync_seconds": 0.25})
    svc.record_totals({"bytes_pushed": 150, "bytes_pulled": 40, "sync_seconds": 0.5})
    samples = _samples(svc)
    assert samples["distconv_bytes_pushed_total"] == 1150
    assert samples["distconv_bytes_pulled_total"] == 440
    assert samples["distconv_allreduce_seconds_count"] == 3
    assert samples["distconv_allreduce_seconds_sum"] == 2.5


@pytest.mark.parametrize("restart", ["x", "-1"])
def test_train_frees_the_probes_port_when_the_restart_count_is_bad(monkeypatch, restart):
    """``distconv.job.train`` bound the health port, then read DISTCONV_RESTART, outside the
    try that closes the endpoints: a malformed (or negative) count raised with the port still
    bound and its server thread running."""

    from distconv.job import TrainConfig, train

    monkeypatch.setenv("DISTCONV_RESTART", restart)
    # a port named before the run: the count is now read before the port is bound, so a port
    # 0 would be named by no line; held, shared, so that no other program takes it meanwhile
    refused = "DISTCONV_RESTART must be an integer|restarts must be"
    with held_port(shared=True) as port:
        with pytest.raises(ValueError, match=refused):
            train(TrainConfig(data="synthetic", epochs=1, health_port=port, sync="local"))
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # beside the held one
            s.bind(("127.0.0.1", port))  # EADDRINUSE if the endpoints still served


@pytest.mark.timeout(60)
def test_close_drops_the_connections_it_serves():
    """close() stopped the accept loop and released the port, but a connection already
    accepted kept its handler thread and socket for up to CLIENT_SECONDS (daemon threads are
    not joined), and a request sent on it after close() was still answered."""
    import threading

    svc = ServiceEndpoints()
    port = svc.start()
    silent = socket.create_connection(("127.0.0.1", port))
    try:
        silent.settimeout(5)  # below CLIENT_SECONDS: the server's timeout is not what closes it
        assert get(port, "/readyz")[0] == 503  # the silent one's handler is running by now
        svc.close()
        assert not any("process_request" in t.name for t in threading.enumerate())
        assert silent.recv(1) == b""  # closed by close(), at once
    finally:
        silent.close()


def test_totals_are_told_apart_by_the_strategy_that_reports_them():
    """record_totals took a new strategy only by a total below the last one: a second Trainer
    whose first step (its setup's seeding included) moved more than the first strategy had
    in all lost the first one's totals, a trainer going back to its own strategy had the
    other's subtracted, and a drop in the bytes alone left the seconds counted from the old
    strategy's."""

    class Strategy:
        pass

    svc = ServiceEndpoints()
    first, second = Strategy(), Strategy()

    def counted() -> tuple[float, float]:
        samples = _samples(svc)
        return samples["distconv_bytes_pushed_total"], samples["distconv_allreduce_seconds_sum"]

    svc.record_totals({"bytes_pushed": 1000, "sync_seconds": 0.5}, first)
    svc.record_totals({"bytes_pushed": 1500, "sync_seconds": 0.25}, second)
    assert counted() == (2500, 0.75)
    svc.record_totals({"bytes_pushed": 1600, "sync_seconds": 0.75}, second)
    svc.record_totals({"bytes_pushed": 1100, "sync_seconds": 1.0}, first)  # first goes on
    assert counted() == (2700, 1.75)
    svc.record_totals({"bytes_pushed": 10, "sync_seconds": 1.0}, first)  # a drop: all from 0
    assert counted() == (2710, 2.75)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/nope"])
def test_head_sends_no_body_on_the_wire(service, path):
    """http.client never reads a body after HEAD (it takes the length as 0), so a body sent
    anyway passed test_head_is_answered_as_get_without_a_body; the raw bytes say."""

    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as client:
        client.sendall(f"HEAD {path} HTTP/1.0\r\n\r\n".encode())
        raw = b""
        while chunk := client.recv(65536):  # HTTP/1.0: the server closes after the answer
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Content-Length: " in head and not head.endswith(b"Content-Length: 0")
    assert body == b"", body[:80]


@pytest.mark.timeout(120)
def test_the_probes_port_is_logged_under_quiet_too(tmp_path):
    """``distconv -q train --health-port 0`` (warnings only) logged no line naming the port
    the kernel chose, and nothing else names it: its probes could not be found.
    A shard prints its own whatever the level; a worker's line now goes through in any case."""
    import re
    import subprocess
    import sys

    argv = [sys.executable, "-m", "distconv", "-q", "train", "--data", "synthetic", "--epochs",
            "1", "--no-progress", "--out", str(tmp_path / "run"), "--health-port", "0"]  # fmt: skip
    env = child_env(OMP_NUM_THREADS="1")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=100, env=env)
    assert done.returncode == 0, done.stderr
    assert re.search(r"probes and metrics on port [1-9][0-9]*\n", done.stderr), done.stderr
    assert "training on synthetic" not in done.stderr  # -q still holds back the rest


@pytest.mark.timeout(60)
def test_a_burst_of_connections_waits_for_the_accept_loop():
    """The stdlib's listen backlog of 5 dropped the connections of a burst past the sixth while
    the accept loop was busy: 300 concurrent scrapes saw 21 of them reset."""
    import threading

    from distconv.probe_http import ProbeHTTPServer, handler_for

    server = ProbeHTTPServer(("127.0.0.1", 0), handler_for(ServiceEndpoints()))
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    clients: list[socket.socket] = []
    try:  # listening, not accepting yet: every connection waits in the kernel's queue
        for _ in range(64):
            clients.append(socket.create_connection(server.server_address, timeout=2))
        serving.start()
        for client in clients:
            client.sendall(b"GET /readyz HTTP/1.0\r\n\r\n")
        assert all(client.recv(64).startswith(b"HTTP/1.0 503") for client in clients)
    finally:
        for client in clients:
            client.close()
        if serving.is_alive():
            server.shutdown()
        server.server_close()


def _status(port: int, target: str) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(4096):
            data += chunk
    return int(data.split(b" ", 2)[1])


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "target, status",
    [
        ("/healthz", 200),
        ("http://127.0.0.1/healthz", 200),
        ("HTTP://example:9100/readyz?x=1", 503),
        ("http://127.0.0.1/metrics", 200),
        ("http://127.0.0.1/nope", 404),
        ("/nope?u=http://h/healthz", 404),
        ("http://[::1/healthz", 404),  # a target the URL parser refuses: no reply at all
    ],
)
def test_absolute_form_targets_are_answered_by_path(target, status):
    with ServiceEndpoints() as service:
        port = service.start()
        assert _status(port, target) == status
