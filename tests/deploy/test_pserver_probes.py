"""A real ``distconv pserver`` serves its probes: not ready until seeded, healthy while serving,
failed (naming why) at once when its job fails."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from distconv.deploy import render_manifests
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.ps.cli import PROBE_HOST
from distconv.sync.ps.client import PServerSync
from tests.child_env import child_env
from tests.probes import SHARD_PROBES, bound_port

REPO_ROOT = Path(__file__).resolve().parents[2]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def status(port: int, path: str) -> int:
    return get(port, path)[0]


@contextlib.contextmanager
def served_shard(tmp_path: Path, workers: int, *flags: str) -> Iterator[tuple[str, int]]:
    """A ``distconv pserver`` process serving, its probes on a port the kernel chose (its
    stderr to a log in ``tmp_path``); its endpoint and that port, once the probes answer.
    Ended (and must exit 0) on leaving."""
    log = tmp_path / "shard.log"
    with open(log, "w") as err:
        shard = subprocess.Popen(
            [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0", "--shard", "0",
             "--num-shards", "1", "--workers", str(workers), "--insecure",
             "--health-port", "0", *flags],
            stdout=subprocess.PIPE, stderr=err, text=True, env=child_env(OMP_NUM_THREADS="1"),
        )  # fmt: skip
    try:
        endpoint = shard.stdout.readline().split()[-1]
        yield endpoint, bound_port(log, SHARD_PROBES, shard, limit=30)  # bound before it says
    finally:
        shard.terminate()
        assert shard.wait(timeout=20) == 0, log.read_text()
        shard.stdout.close()


def _rank_zero(endpoint: str, world_size: int, timeout: float) -> tuple:
    """A small net and rank 0's insecure sync of ``world_size`` ranks on the shard at
    ``endpoint`` (not set up)."""
    set_seed(0)
    net = lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)
    sync = PServerSync(
        create_optimizer("sgd", lr=0.1), rank=0, world_size=world_size, pservers=[endpoint],
        insecure=True, timeout=timeout,
    )  # fmt: skip
    return net, sync


@pytest.mark.timeout(60)
def test_shard_turns_ready_once_seeded_and_stays_healthy(tmp_path):
    with served_shard(tmp_path, 1) as (endpoint, health):
        assert status(health, "/readyz") == 503 and status(health, "/healthz") == 200
        net, sync = _rank_zero(endpoint, world_size=1, timeout=10)
        try:
            sync.setup(net.parameters())
            deadline = time.monotonic() + 10
            while status(health, "/readyz") != 200:
                assert time.monotonic() < deadline, "seeded, but /readyz stayed 503"
                time.sleep(0.05)
            assert status(health, "/healthz") == 200
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{health}/metrics").read()
            assert b'distconv_ready{rank="0",role="server"} 1.0' in metrics
        finally:
            sync.close()


def _worker(endpoint: str, rank: int, world: int, steps: int, nan_step: int, errors: list) -> None:
    """Rank ``rank`` of ``world``: ``steps`` steps (from 0), rank 1's gradient NaN in step
    ``nan_step``; the error of the step that failed goes into ``errors[rank]``."""
    set_seed(0)
    net = lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)
    sync = PServerSync(
        create_optimizer("sgd", lr=0.1), rank=rank, world_size=world, pservers=[endpoint],
        insecure=True, timeout=20,
    )  # fmt: skip
    try:
        sync.setup(net.parameters())
        for step in range(steps):
            sync.start_step(4)
            for param in net.parameters():
                param.grad[...] = np.nan if step == nan_step and rank == 1 else 0.5
                sync.on_gradient(param)
            try:
                sync.finish_step()
            except SyncError as exc:
                errors[rank] = str(exc)
                return
    finally:
        sync.close()


@pytest.mark.timeout(90)
def test_a_failed_shard_says_so_at_once_with_its_last_step_not_its_update_count(tmp_path):
    """/healthz said "ok", then "stalled" after the stall limit, for a shard whose job
    had failed, and its "last step" was the number of updates. The stall limit here is far off,
    so a 503 can only be the failure's; 3 steps of 8 parameters are 24 updates, not step 3."""
    flags = ("--stall-seconds", "300", "--timeout", "20")
    with served_shard(tmp_path, 2, *flags) as (endpoint, health):
        errors: list = [None, None]
        ranks = [
            threading.Thread(target=_worker, args=(endpoint, r, 2, 4, 3, errors), daemon=True)
            for r in (0, 1)
        ]
        for t in ranks:
            t.start()
        for t in ranks:
            t.join(60)
        assert not any(t.is_alive() for t in ranks), "a worker hung"
        assert all(e and "the update diverged" in e for e in errors), errors
        deadline = time.monotonic() + 30  # the loop's next turn, not the stall limit (300 s)
        while (answer := get(health, "/healthz"))[0] == 200:
            assert time.monotonic() < deadline, f"the job failed, /healthz still says {answer}"
            time.sleep(0.05)
        status_code, body = answer
        assert status_code == 503, answer
        failed = "failed: server 0, last step 3: job failed: the update diverged"
        assert body.startswith(failed), body
        assert "rank 1's part is not finite" in body and "stalled" not in body
        assert get(health, "/readyz")[0] == 200  # the blocks are there: only liveness fails
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{health}/metrics").read()
        assert b'distconv_step{rank="0",role="server"} 3.0' in metrics


def _rendered_shard_container(workers: int) -> dict:
    """The shard container ``distconv-launch k8s`` renders for a job of ``workers`` workers."""
    (shards,) = [
        o
        for o in render_manifests(job_name="j", workers=workers, servers=1, image="d:1")
        if o["kind"] == "StatefulSet"
    ]
    (container,) = shards["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.timeout(60)
def test_the_rendered_startup_probe_fails_a_shard_whose_job_failed_before_its_seed(tmp_path):
    """The startup probe holds liveness off until it first passes. On /readyz, 503 until
    seeded, it held off for 20 minutes a shard whose job failed before any seed: never
    restarted, the shard refused every worker until the Job ran out of retries. The rendered
    probes, asked of a real shard: 2xx while it waits healthy for its workers, not once its
    job failed (here rank 1's worker is killed after its hello, rank 0 not yet come: a rank
    late to start, or ranks of different jobs meeting, no longer fail it), so Kubernetes
    restarts it."""
    container = _rendered_shard_container(2)
    startup, liveness = (container[p]["httpGet"]["path"] for p in ("startupProbe", "livenessProbe"))
    flags = ("--timeout", "5", "--stall-seconds", "300")
    with served_shard(tmp_path, 2, *flags) as (endpoint, health):
        assert (status(health, "/readyz"), status(health, startup)) == (503, 200)
        with _rank_one_process(endpoint) as worker:
            deadline = time.monotonic() + 20  # its hello answered: the shard follows its pid
            while _bytes_out(health) == 0:
                assert worker.poll() is None, "rank 1's worker ended before its hello"
                assert time.monotonic() < deadline, "rank 1's hello was never answered"
                time.sleep(0.05)
            assert status(health, startup) == 200  # it waits for rank 0: healthy
            worker.kill()
        deadline = time.monotonic() + 10  # the loop's next look, not the stall limit
        while (answer := get(health, startup))[0] == 200:
            assert time.monotonic() < deadline, f"the job failed, {startup} still says {answer}"
            time.sleep(0.05)
        assert answer[0] == 503 and answer[1].startswith("failed: server 0, last step none yet")
        assert "rank 1" in answer[1] and "ended without a bye" in answer[1], answer
        assert status(health, liveness) == 503 and status(health, "/readyz") == 503


#: rank 1 of a job of :func:`_rank_zero`'s net, set up on the shard at ``argv[1]``
_RANK_ONE = """\
import sys
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync
set_seed(0)
net = lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)
sync = PServerSync(
    create_optimizer("sgd", lr=0.1), rank=1, world_size=2, pservers=[sys.argv[1]],
    insecure=True, timeout=20,
)
sync.setup(net.parameters())
"""


@contextlib.contextmanager
def _rank_one_process(endpoint: str) -> Iterator[subprocess.Popen]:
    """A process of rank 1 of 2 setting up on the shard at ``endpoint`` (waiting for rank 0
    in its start-up gather); killed on leaving if it still runs."""
    worker = subprocess.Popen(
        [sys.executable, "-c", _RANK_ONE, endpoint],
        stderr=subprocess.DEVNULL, env=child_env(OMP_NUM_THREADS="1"),
    )  # fmt: skip
    try:
        yield worker
    finally:
        worker.kill()
        worker.wait(timeout=20)


def _bytes_out(health: int) -> float:
    """The bytes the shard with probes on ``health`` has sent (its /metrics)."""
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{health}/metrics", timeout=5).read()
    (line,) = [x for x in metrics.decode().splitlines() if x.startswith("distconv_shard_bytes_out")]
    return float(line.split()[-1])


@pytest.mark.timeout(60)
def test_an_async_shard_beats_with_the_highest_step_it_applied(tmp_path):
    """Async: 3 pushes of 8 parameters are 24 updates; the shard's last step is 3."""
    with served_shard(tmp_path, 1, "--mode", "async") as (endpoint, health):
        errors: list = [None]
        _worker(endpoint, 0, 1, 3, -1, errors)
        assert errors == [None]
        deadline = time.monotonic() + 10  # the loop's next turn reports it
        while not (answer := get(health, "/healthz"))[1].startswith("ok: server 0, last step 3,"):
            assert time.monotonic() < deadline, answer
            time.sleep(0.05)


def test_probes_bind_loopback_unless_asked():
    from distconv.cli import build_parser
    from distconv.job import TrainConfig

    args = build_parser().parse_args(
        ["pserver", "--bind", "0.0.0.0:1", "--shard", "0", "--num-shards", "1", "--workers", "1"]
    )
    # unset, so that it is refused without --health-port; the config's default applies
    assert args.health_host is None and args.health_port is None
    assert PROBE_HOST == "127.0.0.1"
    train = build_parser().parse_args(["train"])
    assert train.health_host is None and TrainConfig().health_host == "127.0.0.1"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "flags, said",
    [
        (["--stall-seconds", "5"], "--stall-seconds is a setting of the probes, and this run"),
        (["--health-host", "0.0.0.0"], "--health-host is a setting of the probes, and this run"),
        (["--health-port", "0", "--health-host", ""], "--health-host: must not be empty"),
    ],
)
def test_a_probe_setting_without_probes_or_a_blank_host_stops_the_shard(flags, said, tmp_path):
    """As for ``distconv train``: without --health-port nothing read the interface or the limit
    asked for, and a blank --health-host bound every interface, not loopback alone; the shard
    now refuses either before it makes or binds anything."""
    parts = tmp_path / "parts"
    argv = [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0", "--shard", "0",
            "--num-shards", "1", "--workers", "1", "--insecure", "--checkpoint-dir", str(parts),
            *flags]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode in (1, 2), done
    assert said in done.stderr
    assert "listening on" not in done.stdout and not parts.exists()


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
@pytest.mark.parametrize("probes", [[], ["--health-port", "0"]])
def test_a_stall_limit_out_of_range_is_a_usage_error(value, probes, capsys):
    """--stall-seconds took any float: with --health-port, 0, -5, nan or inf stopped the shard
    with a ValueError traceback from ServiceEndpoints, naming no flag; without it the value was
    taken, and the deploy checks passed a manifest whose shard would crash-loop once probes
    were added."""
    from distconv.cli import build_parser, main

    argv = ["pserver", "--bind", "127.0.0.1:0", "--shard", "0", "--num-shards", "1"]
    argv += ["--workers", "1", "--insecure", *probes, "--stall-seconds", value]
    with pytest.raises(SystemExit) as exited:  # without probes, main would serve: parse only
        main(argv) if probes else build_parser().parse_args(argv)
    assert exited.value.code == 2
    finite = value in ("nan", "inf")  # refused as every decimal flag refuses them
    words = f"must be finite, got {value!r}" if finite else f"must be finite and > 0, got {value}"
    assert f"--stall-seconds: {words}" in capsys.readouterr().err


OPERATIONS = REPO_ROOT / "docs" / "operations.md"


@pytest.mark.timeout(60)
def test_a_shard_counts_the_steps_its_workers_number_as_the_docs_say(tmp_path):
    """A shard's last step is the step its workers' pushes carry: the run's, where the
    Trainer tells them (``start_at``: tests/sync/ps/test_ps_resumed_step_numbers.py), else the
    sync's own count from 1, as a loop of one's own that never calls it numbers them (this
    test's workers). Workers resumed at step 686 once said 'last step 1192', their shard 'last
    step 505'; the docs now say which count a shard's is. Here a run of 3 steps, then a new run
    (re-seeded) of 2 told nothing: the shard says step 2, not 3 or 5."""
    with served_shard(tmp_path, 1) as (endpoint, health):
        for steps in (3, 2):  # the run stopped, then the resumed run's fresh worker
            errors: list = [None]
            _worker(endpoint, 0, 1, steps, -1, errors)
            assert errors == [None]
        deadline = time.monotonic() + 10  # the loop's next turn reports it
        while not (answer := get(health, "/healthz"))[1].startswith("ok: server 0, last step 2,"):
            assert time.monotonic() < deadline, answer
            time.sleep(0.05)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{health}/metrics").read()
        assert b'distconv_step{rank="0",role="server"} 2.0' in metrics
    said = " ".join(OPERATIONS.read_text().split())
    assert "in the run's count of steps, which the Trainer tells its workers" in said, (
        "docs/operations.md, Probes"
    )
