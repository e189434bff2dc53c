"""What the MPI scripts and the tests that start them share: the model, the data, the steps.

The scripts run under ``mpiexec`` (``python -m mpi4py tests/mpi/<script>.py OUT ...``) and write
their results as ``.npz`` files; the tests compare those with single-process training here.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.backend import to_device
from distconv.equivalence import max_relative_difference as max_relative  # noqa: F401
from distconv.equivalence import model, training_data, weights
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.resume import Preempted
from distconv.sync.base import SyncError, SyncStrategy
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.step_check import CLOSED
from tests.child_env import child_path
from tests.processes import run_job

if TYPE_CHECKING:
    from distconv.trainer import Trainer

HERE = Path(__file__).resolve().parent


def fake_cupy(name: str = "cupy") -> ModuleType:
    """The stand-in cupy of ``tests/mpi/fake_cupy``, loaded in this process under ``name`` and
    left out of ``sys.modules`` (a real cupy stays where it is): under ``"cupy"`` its arrays
    are device arrays to :func:`~distconv.backend.is_gpu_array`, which goes by their module."""
    path = HERE / "fake_cupy" / "cupy" / "__init__.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REPO_ROOT = HERE.parents[1]
#: the global batch of each step; the last one is uneven (7 examples over 2 ranks: 4 + 3)
GLOBAL_BATCHES = (16, 16, 16, 7)


def small_lenet(seed: int, channels: Sequence[int] = (2, 3)) -> Network:
    """The small float64 LeNet of the equivalence tests, initialised from ``seed``."""
    return model(seed, channels)


def global_batches(sizes: Sequence[int] = GLOBAL_BATCHES, seed: int = 7):
    """The same global batches ``(x, y)`` on every rank and in the single-process reference."""
    rng = np.random.default_rng(seed)
    for n in sizes:
        yield rng.standard_normal((n, 1, 8, 8)), rng.integers(0, 4, n)


def trainer_data(n: int = 37, seed: int = 3) -> dict[str, np.ndarray]:
    """``n`` examples for the Trainer tests (37 or 45: the last global step of 12 is short)."""
    return training_data(n, seed)


def train(net: Network, sync: SyncStrategy, rank: int = 0, world: int = 1) -> None:
    """Run every global batch as one step; this rank takes examples ``rank::world``."""
    for x, y in global_batches():
        one_step(net, sync, to_device(x[rank::world]), to_device(y[rank::world]))


def one_step(net: Network, sync: SyncStrategy, xs, ys) -> None:
    """One step of this rank's images ``xs`` and labels ``ys``, by hand (no Trainer)."""
    sync.start_step(len(ys))
    net.forward({"image": Arg(xs, needs_grad=False), "label": Arg(ids=ys, needs_grad=False)})
    net.backward(sync, loss="loss", loss_scale=len(ys))
    sync.finish_step()


#: an MPICH shared-memory file in a process's ``/proc/<pid>/maps``, unlinked already
#: (`` (deleted)``, as distconv leaves it once MPI is up) or not (kept here rather than taken
#: from :mod:`distconv.sync.mpi.shared_memory`: a test must not take it from the code it tests)
NODE_SEGMENT = re.compile(r" (/dev/shm/mpich_(?:shm|vci)_[^ /\n]+)(?: \(deleted\))?$", re.M)


def node_segments(maps: str | Path = "/proc/self/maps") -> set[str]:
    """The paths of the MPICH shared-memory files a process maps, unlinked or not, read from
    its ``maps`` (``/proc/<pid>/maps``); none where it cannot be read (the process is gone)."""
    try:
        return set(NODE_SEGMENT.findall(Path(maps).read_text(errors="replace")))
    except OSError:
        return set()


def record_segments(records: Path, rank: int) -> None:
    """Write the MPICH files this process maps (:func:`node_segments`) to
    ``records/rank<rank>.shm``, one path a line, for :func:`recorded_segments`."""
    (records / f"rank{rank}.shm").write_text("".join(f"{p}\n" for p in sorted(node_segments())))


def recorded_segments(records: Path) -> set[str]:
    """Every path the ranks' :func:`record_segments` wrote to ``records``."""
    return {line for f in records.glob("rank*.shm") for line in f.read_text().split()}


def mpiexec() -> str | None:
    """The ``mpiexec`` on PATH, or None (the tests then skip)."""
    return shutil.which("mpiexec")


#: the ways on that MPISync's refusals after a failed or abandoned step name (the words, kept
#: here rather than imported: a test of them must not take them from the code it tests)
WAYS_ON = (
    "set up again on every rank (a fit does; fit(resume=...) goes on from the last "
    "checkpoint's whole step) unless a rank abandoned this step that another counted (its "
    "finish_step failed: 'another rank abandoned the step'), which that setup refuses, naming "
    "it; or close the sync (it ends the job)"
)

#: the way on a step refused after a setup every rank refused (a JobMismatch) names (kept here
#: too, not imported from the code)
AFTER_FAILED_SETUP = (
    "a step needs a setup that succeeds on every rank (the error names the difference, or "
    "why none can); or close the sync (it ends the job)"
)

#: every test module that starts ``mpiexec``: marked ``mpi``, skipped where there is none
NEEDS_MPIEXEC = [
    pytest.mark.mpi,
    pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed"),
]


def mpi_env() -> dict[str, str]:
    """The environment of an ``mpiexec`` a test starts: this worktree's distconv importable,
    one BLAS thread, and Open MPI told to run as root and oversubscribe."""
    return {
        **os.environ,
        "PYTHONPATH": child_path(),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        # Open MPI refuses root (CI runs as root) and more ranks than cores unless told;
        # MPICH ignores these
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
    }


def run_mpi(args: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``mpiexec ARGS`` with this worktree's distconv importable and one BLAS thread.

    ``timeout`` bounds the whole job: a hang fails the test (``TimeoutExpired``, with a note
    naming the processes of the job it killed) instead of eating CI, and every process of the
    job is killed, so none outlives its test (:func:`tests.processes.run_job`).
    """
    env = mpi_env()
    # every process of the job (mpiexec, Hydra's proxy, the ranks, what they start: Hydra hands
    # them its environment) carries run_job's mark: a hang is killed whole, orphans included
    return run_job(
        [mpiexec(), *args],
        env,
        timeout,
        start_new_session=True,  # its own process group, as before: no terminal signal reaches it
    )


def script(name: str, thread_level: str | None = None) -> list[str]:
    """The command line that runs ``tests/mpi/<name>`` under mpi4py's abort-on-error runner.

    ``thread_level`` (``"single"``, ``"funneled"``, ...) initialises MPI at that level instead
    of mpi4py's default, MULTIPLE (``mpi4py.rc.thread_level``, set before MPI starts).
    """
    rc = ["-rc", f"thread_level={thread_level}"] if thread_level else []
    return [sys.executable, "-m", "mpi4py", *rc, str(HERE / name)]


def reference(optimizer: str, channels: Sequence[int] = (2, 3)) -> dict[str, np.ndarray]:
    """One process, LocalSync, the whole global batch each step (``small_lenet``'s channels)."""
    net = small_lenet(0, channels)
    sync = LocalSync(create_optimizer(optimizer))
    sync.setup(net.parameters(), {})
    train(net, sync)
    return weights(net)


def run_ranks(
    out: Path, optimizer: str, *options: str, thread_level: str | None = None, ranks: int = 2
) -> tuple[list[dict[str, np.ndarray]], subprocess.CompletedProcess]:
    """Train with ``run_train.py`` under ``mpiexec -n RANKS``: each rank's saved arrays, the
    job."""
    command = [*script("run_train.py", thread_level), str(out), optimizer, *options]
    proc = run_mpi(["-n", str(ranks), *command])
    assert proc.returncode == 0, proc.stderr
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(ranks)], proc


def save_layout(out: Path, sync: MPISync, net: Network) -> None:
    """Write this rank's gradient buckets (each one's parameter names, in layout order) and its
    network's firing order to ``OUT.rank<r>.json``; before the sync's close."""
    buckets = [[p.name for p in b.params] for b in sync.buckets]
    layout = {"buckets": buckets, "fired": net.firing_order}
    Path(f"{out}.rank{sync.rank}.json").write_text(json.dumps(layout))


def assert_laid_out_as_fired(out: Path, fired: Sequence[str], ranks: int = 2) -> None:
    """Every rank's network recorded ``fired`` and its sync laid out a bucket of each
    parameter, in that order (:func:`save_layout`'s files)."""
    layouts = [json.loads(Path(f"{out}.rank{r}.json").read_text()) for r in range(ranks)]
    assert [layout["fired"] for layout in layouts] == [list(fired)] * ranks, layouts
    buckets = [layout["buckets"] for layout in layouts]
    assert buckets == [[[name] for name in fired]] * ranks, f"buckets {buckets}, fired {fired}"


def params_of(saved: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The parameters among a rank's saved arrays (the rest start with ``_``)."""
    return {k: v for k, v in saved.items() if not k.startswith("_")}


class RecordingComm(SingleRankComm):
    """One rank, recording the collectives in the order they are called and waited for.

    ``sizes``: log each gradient allreduce with its byte count (``"Iallreduce 400"``). The
    exchange of which parameters fired (one byte each) is logged as ``"used flags"``, the
    last step check, when the sync closes, as ``"Iallgather closing"``.
    """

    def __init__(self, sizes: bool = False) -> None:
        self.log: list[str] = []
        self.sizes = sizes

    def Iallgather(self, send, recv):  # noqa: N802 - mpi4py's spelling
        self.log.append("Iallgather closing" if send[0] == CLOSED else "Iallgather")
        super().Iallgather(send, recv)
        return _LoggedRequest(self.log, "check complete")

    def Iallreduce(self, send, recv, op=None):  # noqa: N802
        if recv.dtype == np.uint8:
            self.log.append("used flags")
        else:
            self.log.append(f"Iallreduce {recv.nbytes}" if self.sizes else "Iallreduce")
        return super().Iallreduce(send, recv, op)


class _LoggedRequest:
    def __init__(self, log: list[str], what: str) -> None:
        self.log, self.what = log, what

    def Wait(self) -> None:  # noqa: N802
        self.log.append(self.what)

    def Test(self) -> bool:  # noqa: N802
        return True


def last_step(sync: SyncStrategy, params: Sequence) -> None:
    """One step of ``sync`` in which every gradient of this rank is ``rank + 1``, fired in
    reverse order, as backward fires them: the runners' last step."""
    sync.start_step(1)
    for p in reversed(params):
        p.grad += sync.rank + 1.0
        p.inc_update(sync)
    sync.finish_step()


def step_and_save(sync: SyncStrategy, params: Sequence, out: Path) -> None:
    """:func:`last_step`, the parameters then saved to ``out/values{rank}.npz``, whose values
    the tests compare."""
    last_step(sync, params)
    np.savez(out / f"values{sync.rank}.npz", **{p.name: p.value for p in params})


def one_rank_step(param, grad: np.ndarray, examples: int = 1, **options):
    """One step of ``param`` with gradient ``grad`` through an MPISync on a world of one
    (``options``: its keyword arguments, ``optimizer`` SGD by default); returns ``param``."""
    optimizer = options.pop("optimizer", None) or create_optimizer("sgd")
    sync = MPISync(optimizer, comm=SingleRankComm(), **options)
    sync.setup([param], {})
    try:
        sync.start_step(examples)
        param.grad += grad
        sync(param)
        sync.finish_step()
    finally:
        sync.close()
    return param


def bucket_params(names: str = "ab") -> list[Parameter]:
    """A parameter per letter of ``names``, the i-th holding ``arange(3.0) + i``: 24 bytes,
    a bucket each under :func:`bucket_sync` (laid out last to first, as backward fires)."""
    return [Parameter(n, np.arange(3.0) + i) for i, n in enumerate(names)]


def bucket_sync(**options) -> MPISync:
    """An MPISync with SGD at lr 0.5 and 24-byte buckets (one per :func:`bucket_params`
    parameter); ``options``: its other keyword arguments (``comm``, ``overlap``, ``timeout``)."""
    return MPISync(create_optimizer("sgd", lr=0.5), bucket_bytes=24, **options)


def fire(sync: SyncStrategy, param: Parameter, grad: float) -> None:
    """Add ``grad`` to ``param``'s gradient and hand it to ``sync``, as backward does."""
    param.grad += grad
    param.inc_update(sync)


def finish_failed_on_rank_0(sync: SyncStrategy, params: Sequence[Parameter]) -> None:
    """A step of ``sync`` (set up for ``params``) whose ``finish_step`` fails on rank 0 alone:
    every parameter fires, then rank 0 replaces one's gradient after it fired."""
    sync.start_step(1)
    for p in reversed(params):
        fire(sync, p, 1.0)
    if sync.rank == 0:
        params[0].grad = params[0].grad * 1.0  # replaced after it fired: fails here alone
    with contextlib.suppress(SyncError):
        sync.finish_step()


def open_step(sync: SyncStrategy, params: Sequence[Parameter], grad: float) -> None:
    """Set ``sync`` up for ``params`` and start step 0, in which the last parameter (its
    bucket first on the wire) fires ``grad``: the step the runners then leave open."""
    sync.setup(params, {})
    sync.start_step(1)
    fire(sync, params[-1], grad)


def refit_and_save(sync: SyncStrategy, params: Sequence[Parameter], out: Path) -> None:
    """Zero every gradient and set ``sync`` up again (a second fit, as ``Trainer.fit`` does),
    then :func:`step_and_save`."""
    for p in params:
        p.zero_grad()
    sync.setup(params, {})
    step_and_save(sync, params, out)


def run_two_ranks(name: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``tests/mpi/<name> OUT ARGS`` under ``mpiexec -n 2`` (skipped without mpi4py);
    the job, which must have exited 0."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script(name), str(out), *args], timeout=90)
    assert proc.returncode == 0, proc.stderr
    return proc


def assert_moved(out: Path, moved: float, names: str = "ab") -> None:
    """Each rank's ``OUT/values<rank>.npz`` holds :func:`bucket_params` each moved down by
    ``moved``."""
    for rank in (0, 1):
        values = np.load(out / f"values{rank}.npz")
        for i, name in enumerate(names):
            np.testing.assert_allclose(values[name], np.arange(3.0) + i - moved, err_msg=name)


class StuckStart(SingleRankComm):
    """One rank whose gradient allreduce's start blocks until released; or (``fail``) fails
    at once, and the used-parameter flags' start (a ``uint8`` buffer) blocks instead."""

    def __init__(self, fail: bool) -> None:
        super().__init__()
        self.fail, self.release = fail, threading.Event()

    def Iallreduce(self, send, recv, op=None):  # noqa: N802 - mpi4py's spelling
        flags = np.asarray(recv).dtype == np.uint8
        if self.fail and not flags:
            raise RuntimeError("the link to rank 1 is broken")
        if flags == self.fail:
            self.release.wait(30)  # the broken link: the start never returns by itself
        return super().Iallreduce(send, recv, op)


@contextlib.contextmanager
def recorded(sync: SyncStrategy, out: Path) -> Iterator[None]:
    """A runner's body: an error there is written to ``out/rank<r>.err`` (mpiexec may drop an
    aborting rank's stderr) and raised; ``sync`` is closed after it either way."""
    try:
        yield
    except Exception as exc:
        (out / f"rank{sync.rank}.err").write_text(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        sync.close()


@contextlib.contextmanager
def stuck_step(fail: bool) -> Iterator[tuple[MPISync, Parameter]]:
    """An overlapped MPISync over :class:`StuckStart` (``timeout`` 1 s) and its parameter
    ``w``, in step 0 with ``w``'s gradient (1) handed to the thread, whose start blocks. On
    exit the start is released and the sync closed, a SyncError from the close ignored."""
    comm = StuckStart(fail)
    sync = MPISync(create_optimizer("sgd"), comm=comm, overlap=True, timeout=1.0)
    param = Parameter("w", np.arange(3.0))
    sync.setup([param], {})
    try:
        sync.start_step(1)
        param.grad += 1.0
        sync(param)
        yield sync, param
    finally:
        comm.release.set()
        with contextlib.suppress(SyncError):
            sync.close()


def assert_left_to_the_watchdog(args: Sequence[str], folder: Path, wait: str) -> None:
    """``mpiexec -n 2 SCRIPT ARGS``, whose rank 1 never reaches a wait rank 0 holds its
    Ctrl-Cs in (two SIGINTs, noted, held): rank 0's watchdog (2 s) still stops the job, in
    seconds, naming ``wait``, and no rank said anything into ``folder``."""
    began = time.monotonic()
    proc = run_mpi(["-n", "2", *args], timeout=40)
    assert proc.returncode != 0, proc.stderr
    assert "rank 0: SyncError: waited" in proc.stderr, proc.stderr
    assert wait in proc.stderr, proc.stderr
    assert time.monotonic() - began < 30
    assert not list(folder.glob("said*.txt"))


class AbortRecorder:
    """Stands in for a communicator: records Abort instead of ending the process."""

    def __init__(self) -> None:
        self.aborted: list[int] = []

    def Abort(self, code: int) -> None:  # noqa: N802 - mpi4py's name
        self.aborted.append(code)


def fit_and_exit(trainer: Trainer, sync: MPISync, out: Path, fit: Callable[[], None]) -> NoReturn:
    """A stop test's rank after ``fit``: its ``Preempted``'s message and exit status (or that it
    finished, status 0) and the step it stopped at written to ``OUT/rank<r>.json``, ``sync``
    closed, and the process ended with that status, as the command line would end it."""
    said: dict[str, Any] = {"finished": True, "status": 0}
    try:
        fit()
    except Preempted as exc:
        said = {"message": str(exc), "status": exc.exit_status}
    finally:
        sync.close()
    said["step"] = trainer.pos.step
    (out / f"rank{sync.rank}.json").write_text(json.dumps(said))
    sys.exit(said["status"])
