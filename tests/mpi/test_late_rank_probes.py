"""``distconv train --sync mpi`` with probes, one rank started late: the ranks that wait for it
must not look hung to the worker pods' liveness.

MPI's initialisation waits for every rank, and it holds the GIL while it does (mpi4py runs
``MPI_Init_thread`` from the module's import). A rank that bound its probe port before it
initialised MPI left the port bound but unanswered while a peer was late (loading its data,
building its model): the MPIJob's liveness script timed out on it, and Kubernetes restarted
the waiting ranks' pods 60 to 90 s in, naming no rank. Under MPI a rank now initialises MPI
first, so its port is not bound while it waits, which the liveness script counts as a rank not
yet running.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from distconv.deploy import render_manifests
from tests.mpi.common import NEEDS_MPIEXEC, mpi_env, mpiexec, run_mpi
from tests.probes import held_port
from tests.processes import job_env, job_processes

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: rank 1's start, held until the file named first exists: a data load or a model build that
#: takes long, without a hook in the product
HELD = 'while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"'
EPOCH = re.compile(
    r"\[(\d)/2\] epoch 1/1 +train_loss (\S+) +train_acc (\S+) +test_loss (\S+) +test_acc (\S+)"
)


def _liveness(port: int) -> subprocess.CompletedProcess:
    """The rendered MPIJob worker pods' liveness script, run against ``port`` alone."""
    (mpijob,) = render_manifests(job_name="late", workers=2, servers=0, image="d:1")
    (worker,) = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    script = worker["livenessProbe"]["exec"]["command"][-1]
    assert "range(8080, 8081)" in script
    script = script.replace("range(8080, 8081)", f"range({port}, {port + 1})")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)


def _in_mpi_init(env: dict[str, str], deadline: float) -> int:
    """The pid of the job's rank that runs distconv (rank 0: rank 1 is still its shell) once it
    has loaded the MPI library, which it initialises as soon as it has: from then on it waits
    in ``MPI_Init`` for rank 1."""
    while time.monotonic() < deadline:
        for pid, args in job_processes(env).items():
            if "-m distconv train" not in args:
                continue
            try:
                if "libmpi" in Path(f"/proc/{pid}/maps").read_text():
                    return pid
            except OSError:  # gone meanwhile, or not yet readable
                continue
        time.sleep(0.02)
    raise AssertionError("rank 0 never loaded the MPI library")


@pytest.mark.timeout(90)
def test_a_rank_waiting_for_a_late_one_passes_the_liveness_and_the_job_then_trains(tmp_path):
    """Rank 0 waits in MPI_Init for rank 1, held back: its /healthz is asked over HTTP and the
    rendered liveness run against its port. Before, the port was bound and the request timed
    out (the liveness failed: ``rank on port ...: timed out``); now it is refused, and the
    liveness passes. Released, rank 1 comes and the job trains its epoch.

    Rank 0's port is asked before rank 0 binds it, so it cannot be a port 0 the rank names
    once bound: the test holds it (shared) from before the launch to the end, so no other
    program takes it between; rank 0 binds it beside the held socket, once past MPI_Init."""
    with held_port(shared=True) as port:
        _late_rank_trains(tmp_path, port)


def _late_rank_trains(tmp_path: Path, port: int) -> None:
    """The test above, rank 0's probes on ``port``."""
    go = tmp_path / "go"
    train = [sys.executable, "-m", "mpi4py", "-m", "distconv", "train", "--sync", "mpi"]
    train += ["--epochs", "1", "--no-progress", "--out", str(tmp_path / "run"), "--timeout", "30"]
    # the synthetic set: loaded in a fraction of the digits' second, which each rank's start
    # pays in turn (rank 1's after its release)
    train += ["--data", "synthetic"]
    # local rank 1's port 0 is not shifted by its local rank: the kernel's choice, never asked
    late = ["sh", "-c", HELD, str(go), *train, "--health-port", "0"]
    command = [mpiexec(), "-n", "1", *train, "--health-port", str(port), ":", "-n", "1", *late]
    with job_env(mpi_env()) as env:
        job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _in_mpi_init(env, time.monotonic() + 30)
            time.sleep(0.3)  # well inside MPI_Init, which holds the GIL until rank 1 comes
            with pytest.raises(urllib.error.URLError) as asked:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
            # not bound yet; a timeout here is the hung-looking rank the liveness restarts
            assert isinstance(asked.value.reason, ConnectionRefusedError), asked.value
            live = _liveness(port)
            assert live.returncode == 0, live.stderr
            assert job.poll() is None  # still waiting for rank 1, which then comes
            go.touch()
            out, err = (text.decode() for text in job.communicate(timeout=60))
        finally:
            job.kill()
            job.communicate()
    assert job.returncode == 0, err[-3000:]
    epochs = {m[1]: m.groups()[1:] for m in EPOCH.finditer(err)}
    assert set(epochs) == {"0", "1"}, err[-3000:]
    assert epochs["0"] == epochs["1"]  # trained together: the same global steps, bit for bit
    assert float(epochs["0"][3]) > 0.5, epochs  # four classes after one epoch: well above 25 %
    assert "test accuracy" in out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("runner", [["-m", "mpi4py"], []], ids=["mpi4py", "python"])
def test_a_rank_whose_probe_port_is_taken_ends_the_job_in_one_line(tmp_path, runner):
    """Its port is bound after MPI_Init now, no longer before: the rank that cannot bind it
    closes its sync untrained, which aborts the job, under mpi4py's runner and without it; the
    other rank, past MPI_Init, waited in setup for the watchdog (600 s by default) where the
    rank only exited (Hydra's own end of the job needs an abort or a signal)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        train = [sys.executable, *runner, "-m", "distconv", "train", "--sync", "mpi"]
        train += ["--epochs", "1", "--no-progress", "--out", str(tmp_path / "run")]
        train += ["--data", "synthetic"]
        # local rank 1 serves on --health-port + 1: the port held here
        command = ["-n", "1", *train, ":", "-n", "1", *train, "--health-port", str(port - 1)]
        began = time.monotonic()
        done = run_mpi(command, timeout=40)
    assert done.returncode == 1, done.stderr[-3000:]
    said = f"--health-port: cannot bind probes and metrics on 127.0.0.1:{port}: Address already"
    assert said in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert time.monotonic() - began < 30
