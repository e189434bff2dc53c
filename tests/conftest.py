"""Shared hooks and fixtures: ``-n logical``'s worker count, a seeded generator, the small
synthetic sets the Trainer's tests fit, the optional PyTorch reference, cupy on a device, the
kernel pool's use, the convolution layout forced, a convolution's weight gradient by its
definition; MPI shared-memory files the run's aborted jobs
left, removed as it ends; the checkout compiled once for the run's child processes."""

from __future__ import annotations

import compileall
import contextlib
import glob
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from distconv import stop_request
from distconv.data import split, synthetic
from distconv.sync.mpi.shared_memory import mapped_segments

#: MPICH's shared-memory files in this node's /dev/shm, mpich_shm_* and mpich_vci_*
#: (:mod:`distconv.sync.mpi.shared_memory`)
MPICH_SEGMENTS = "/dev/shm/mpich_*_*"
#: the topology file MPICH's mpiexec (Hydra) writes into /tmp, whatever TMPDIR says, and
#: removes only at a clean end: every job a test ends by an abort or a killed mpiexec left one
HYDRA_TOPOLOGY_FILES = "/tmp/hydra_hwloc_xmlfile_*"
#: a topology file younger than this may be another run's job starting, whose proxies read it
HYDRA_FILE_GRACE_SECONDS = 60.0
#: those there when the run started: not the run's to remove
_SEGMENTS_BEFORE: set[str] = set()


def pytest_configure(config) -> None:
    """Share the checkout's bytecode (:func:`_share_bytecode`), and take Ctrl-C as in a
    terminal. A shell starts a job run with ``&`` (no job control) or under ``nohup`` with
    SIGINT ignored, children inherit that, and the launcher rightly keeps a signal it was
    started ignoring: the tests of what Ctrl-C does (to the launcher, in process or not) then
    failed for a reason that is not the code's (seen: three of them, in a ``.ci/run`` started
    with ``&``). A test of the ignored case sets it in its child itself."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _share_bytecode(config)


#: the folders whose modules the run's child processes import
_SOURCES = ("distconv", "launcher", "tests", "benchmarks", "examples")


def _share_bytecode(config) -> None:
    """Compile this checkout once for the whole run where ``PYTHONDONTWRITEBYTECODE`` is set
    (as on the machines CI runs on). It keeps every Python from writing bytecode, so each of
    the run's ~2000 child processes (commands, launchers, MPI ranks) compiled every distconv
    module it imported from source again: a tenth of a second or more a start, some minutes
    of the run. The variable stops writing, not reading: the bytecode goes where every Python
    looks, the checkout's ``__pycache__`` folders, and what the run wrote is removed as it
    ends. Not ``PYTHONPYCACHEPREFIX``: a Python given a prefix reads bytecode from there alone,
    and every child compiled the standard library and numpy at each start instead, more than
    twice the CPU of the checkout's own modules."""
    if hasattr(config, "workerinput") or not sys.dont_write_bytecode or sys.pycache_prefix:
        return  # a worker (the controller did it), bytecode written anyway, or a prefix given
    root = Path(__file__).resolve().parents[1]
    folders = [root / folder for folder in _SOURCES if (root / folder).is_dir()]
    before = _compiled(folders)
    for folder in folders:
        # quiet: a read-only checkout, or a file that does not compile, is the tests' to report
        compileall.compile_dir(folder, quiet=2)
    written = _compiled(folders) - before  # another run's in this checkout are left to it
    config.add_cleanup(lambda: _remove_compiled(written))


def _compiled(folders: list[Path]) -> set[Path]:
    """The bytecode of this Python in the ``__pycache__`` folders under ``folders``. A folder
    gone while looked at is skipped (``os.walk``'s way): another run's end removes its
    ``__pycache__`` folders at any time, and ``Path.rglob`` raised FileNotFoundError for one
    seen but gone before it was read, which failed this run before its first test."""
    suffix = f".{sys.implementation.cache_tag}.pyc"
    return {
        Path(top, name)
        for folder in folders
        for top, _, names in os.walk(folder)
        if os.path.basename(top) == "__pycache__"
        for name in names
        if name.endswith(suffix)
    }


def _remove_compiled(paths: set[Path]) -> None:
    """Remove ``paths``, and each ``__pycache__`` folder they leave empty."""
    for path in paths:
        with contextlib.suppress(OSError):  # gone already
            path.unlink()
    for folder in {path.parent for path in paths}:
        with contextlib.suppress(OSError):  # another file in it: not the run's
            folder.rmdir()


def pytest_sessionstart(session) -> None:
    _SEGMENTS_BEFORE.update(glob.glob(MPICH_SEGMENTS), glob.glob(HYDRA_TOPOLOGY_FILES))


def pytest_sessionfinish(session) -> None:
    """Once every test is done (in xdist's controller, or a run without it): remove the MPICH
    shared-memory files made since the run started that no process maps. MPICH unlinks its
    file in ``MPI_Finalize``; a job distconv aborts unlinks it first, but many tests end jobs
    otherwise on purpose (``-m mpi4py``'s own abort, a rank killed), and each left 2 MiB of
    memory in /dev/shm until the host rebooted: 23 GiB here after a few days of runs. One made
    in the last second may be a job of another run starting: it is left. Hydra's topology
    files in /tmp likewise (a few KiB each, but hundreds a day), with a minute's grace."""
    if hasattr(session.config, "workerinput"):  # a worker: the controller sweeps once, at the end
        return
    sweep_segments(MPICH_SEGMENTS, _SEGMENTS_BEFORE)
    sweep_segments(HYDRA_TOPOLOGY_FILES, _SEGMENTS_BEFORE, grace=HYDRA_FILE_GRACE_SECONDS)


def sweep_segments(pattern: str, before: set[str], grace: float = 1.0) -> None:
    """Remove the files ``pattern`` matches, but for those in ``before``, one another user
    owns, one any process this user may read maps, and one changed in the last ``grace``
    seconds.

    Another user's is left whatever the maps say: their processes' ``/proc/<pid>/maps`` are
    unreadable to this one (without ``CAP_SYS_PTRACE``, as in a container run as root), so
    their live job's file looked unmapped, and root may unlink it from a sticky /dev/shm."""
    left = set(glob.glob(pattern)) - before
    if not left:
        return
    mapped = {path for maps in glob.glob("/proc/[0-9]*/maps") for path in mapped_segments(maps)}
    for path in sorted(left - mapped):
        with contextlib.suppress(OSError):  # gone already, or not ours to remove
            made = os.stat(path)
            if made.st_uid == os.getuid() and time.time() - made.st_mtime > grace:
                os.unlink(path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int | None:
    """``-n logical`` (the README's and CI's command): two workers per CPU this process may run
    on, up to :data:`_EXTRA_WORKERS` more than the CPUs. The suite mostly waits (for child
    processes to start, for a timeout a test sets off, for a peer's reply): one worker per
    CPU kept the CPUs a third busy (the parameter server's tests: 241 CPU seconds in 335 s
    on 2 CPUs), and two per CPU ran them in 183 s. pytest-xdist asks psutil first where it
    is installed, and psutil counts every CPU of the host, past ``taskset`` and a
    container's ``--cpuset-cpus``: a job pinned to 2 of 64 started 64 workers there.
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides where it is set; ``-n auto`` is left as
    pytest-xdist has it."""
    if config.option.numprocesses != "logical" or os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows: pytest-xdist's own count
        return None
    return min(2 * cpus, cpus + _EXTRA_WORKERS) or None


#: the most workers ``-n logical`` starts beyond one per CPU: each test's children (MPI ranks,
#: shards, launchers) need CPUs of their own too
_EXTRA_WORKERS = 8


@pytest.fixture(autouse=True)
def nothing_carried_out():
    """No test's fit stops by a signal an earlier test's fit handed on (one after its last
    stop check, :func:`~distconv.stop_request.drop_carried`): a test that fails half-way (a
    fit that should have stopped by its signal ran on) would fail every later fit in that
    pytest worker at its first check, one regression read as many. Dropped after each test."""
    yield
    stop_request.drop_carried()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def _synthetic_split(n: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``n`` synthetic 8x8 images of 4 classes (noise 0.3, seed 3), a quarter held out for the
    test set: the same sets for every module that asks."""
    return split(synthetic(n=n, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)


@pytest.fixture(scope="module")
def data() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(train, test): 240 training examples and 80 test, 15 steps an epoch in batches of 16."""
    return _synthetic_split(320)


@pytest.fixture(scope="module")
def small_data() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(train, test): 48 training examples and 16 test, for checks that need a fit, not its
    numbers."""
    return _synthetic_split(64)


@pytest.fixture
def torch():
    """PyTorch as an independent reference; CI installs torch==2.13.0 CPU so these run there."""
    return pytest.importorskip("torch", reason="PyTorch is not importable: parity tests skipped")


@pytest.fixture
def cupy():
    """cupy, with new arrays on the GPU for the test; skipped where cupy or a CUDA device is
    missing (CI has none): ``benchmarks/gpu.py`` runs these on a GPU machine."""
    from distconv.backend import BackendError, set_device

    cp = pytest.importorskip("cupy", reason="cupy is not installed: GPU tests skipped")
    try:
        set_device("gpu")
    except BackendError as exc:
        pytest.skip(str(exc))
    yield cp
    set_device("cpu")


@pytest.fixture
def pool_use(monkeypatch) -> list:
    """Each time a kernel hands chunks to distconv's thread pool, the pool's size: so a test
    of thread counts can check that its chunks really ran on threads."""
    from distconv.kernels import parallel

    submitted: list = []
    real_executor = parallel._executor
    monkeypatch.setattr(parallel, "_executor", lambda n: submitted.append(n) or real_executor(n))
    return submitted


@pytest.fixture
def force_layout(monkeypatch):
    """``force_layout(batched)`` sends every CPU convolution of the test into one layout, past
    the cost model's thresholds."""
    from distconv.kernels import conv_layout

    def force(batched: bool) -> None:
        monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)  # it would time both instead
        monkeypatch.setattr(conv_layout, "BATCHED_MAX_POSITIONS", 10**9 if batched else 0)
        monkeypatch.setattr(conv_layout, "BATCHED_MIN_ROWS", 0)

    return force


@pytest.fixture(params=["per_sample", "batched"])
def layout(request, force_layout) -> str:
    """The test runs once in each convolution layout."""
    force_layout(request.param == "batched")
    return request.param


def _naive_filter_grad(x: np.ndarray, dy: np.ndarray, geom) -> np.ndarray:
    """Each sample's weight gradient ``(N, O, C/G, *k)`` as the definition's sum, tap by tap
    over the zero-padded image (an inf meeting a padding zero is NaN here too)."""
    n, c = x.shape[:2]
    o, G = dy.shape[1], geom.groups
    xpad = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in geom.pad])
    gy = dy.reshape(n, G, o // G, -1)
    dw = np.zeros((n, o, c // G, *geom.ksize))
    for tap in np.ndindex(*geom.ksize):
        sl = tuple(
            slice(t * d, t * d + s * (m - 1) + 1, s)
            for t, d, s, m in zip(tap, geom.dilation, geom.stride, dy.shape[2:])
        )
        patch = xpad[(slice(None), slice(None)) + sl].reshape(n, G, c // G, -1)
        dw[(Ellipsis, *tap)] = np.einsum("ngol,ngcl->ngoc", gy, patch).reshape(n, o, c // G)
    return dw


def _routes_non_finite_like_the_definition(x, dy, geom, what: str, weight_grad, shared: bool):
    """``what`` (``"inf in dy"``, ``"nan in dy"``, ``"inf in x"``) at each position of sample
    1's first plane in turn: ``weight_grad(x, dy)`` must give the definition's NaN pattern and
    values (summed over the samples where the weight is ``shared``)."""
    value = np.nan if what.startswith("nan") else np.inf
    target = x if what.endswith("x") else dy
    for pos in np.ndindex(*target.shape[2:]):
        hit = target.copy()
        hit[(1, 0, *pos)] = value
        xs, dys = (hit, dy) if target is x else (x, hit)
        want = _naive_filter_grad(xs, dys, geom)
        want = want.sum(axis=0) if shared else want
        dw = weight_grad(xs, dys)
        np.testing.assert_array_equal(np.isnan(dw), np.isnan(want), err_msg=f"{what} at {pos}")
        np.testing.assert_allclose(dw, want, rtol=1e-10, atol=1e-10)


@pytest.fixture
def routes_non_finite_like_the_definition():
    """The check above: wide columns and shifted taps read junk past each row's end, which an
    inf or NaN must not turn into NaN where the definition's sum has none."""
    return _routes_non_finite_like_the_definition
