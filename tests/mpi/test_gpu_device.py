"""Each rank takes CUDA device ``LOCAL_RANK``: the choice from the runtime, and the device itself.

Without cupy or a GPU (as on the CI machine) only the choice is tested: which device index a
rank picks from its runtime and the device count, under a real ``mpiexec -n 2``. The last test
needs a GPU and skips without one.
"""

from __future__ import annotations

import sys

import pytest

from distconv.backend import BackendError, gpu_index
from distconv.runtime import detect_runtime
from tests.child_env import child_path
from tests.mpi.common import mpiexec, run_mpi

#: what each rank writes to ``DIR/rank<r>`` (its own file: two ranks' stdout interleave under
#: mpiexec, byte by byte): its rank, then the device it would take with 2 devices, or the error
PICK = (
    "import sys\n"
    "from pathlib import Path\n"
    "from distconv.backend import BackendError, gpu_index\n"
    "from distconv.runtime import detect_runtime\n"
    "rt = detect_runtime()\n"
    "lines = []\n"
    "for count in (2, 1):\n"
    "    try:\n"
    "        lines.append(f'{rt.rank} {count} {gpu_index(rt.local_rank, count)}')\n"
    "    except BackendError as exc:\n"
    "        lines.append(f'{rt.rank} {count} error: {exc}')\n"
    "Path(sys.argv[1], f'rank{rt.rank}').write_text('\\n'.join(lines))\n"
)


@pytest.fixture(autouse=True)
def _no_device_chosen_by_a_scheduler(request, monkeypatch):
    """Every test here without ``CUDA_VISIBLE_DEVICES``: a machine (or a CI job) that names
    one device in it, as a GPU scheduler does, makes that device every rank's
    (:func:`~distconv.backend.gpu_index`), and the errors these tests expect for a second
    rank then never come. Their subprocesses inherit the environment.

    Not for the device test: CUDA reads the variable once, when it starts, so removing it
    before then would hand that test (and the rest of its process) every device of the host,
    other jobs' too; that test removes it itself once CUDA has started."""
    if request.node.get_closest_marker("gpu") is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.mark.parametrize("count", [1, 2, 8])
def test_each_local_rank_takes_its_own_device(count):
    assert [gpu_index(r, count) for r in range(count)] == list(range(count))


def test_more_local_ranks_than_devices_is_a_clear_error():
    with pytest.raises(BackendError, match=r"local rank 2 needs CUDA device 2, .* sees 2 dev"):
        gpu_index(2, 2)
    with pytest.raises(BackendError, match="sees 0 device"):
        gpu_index(0, 0)
    with pytest.raises(BackendError, match="local rank must be >= 0, got -1"):
        gpu_index(-1, 4)


def test_a_device_the_scheduler_chose_is_used_whatever_the_local_rank():
    # SLURM --gpus-per-task=1 or a Kubernetes GPU limit of 1: one device named, seen as device 0
    assert gpu_index(3, 1, visible="5") == 0
    with pytest.raises(BackendError, match="local rank 3 needs CUDA device 3"):
        gpu_index(3, 1, visible="")  # one device, but nobody chose it for this rank


def test_the_device_follows_local_rank_from_the_environment():
    for local in range(3):
        runtime = detect_runtime(environ={"RANK": "3", "WORLD_SIZE": "6", "LOCAL_RANK": str(local)})
        assert gpu_index(runtime.local_rank, 4) == local


@pytest.mark.mpi
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
def test_ranks_under_mpiexec_take_devices_by_local_rank(tmp_path):
    proc = run_mpi(["-n", "2", sys.executable, "-c", PICK, str(tmp_path)], timeout=60)
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["rank0", "rank1"], proc.stdout + proc.stderr
    rank0 = (tmp_path / "rank0").read_text().splitlines()
    rank1 = (tmp_path / "rank1").read_text().splitlines()
    assert rank0 == ["0 2 0", "0 1 0"] and rank1[0] == "1 2 1", (rank0, rank1)
    assert rank1[1].startswith("1 1 error: local rank 1 needs CUDA device 1"), rank1


@pytest.mark.gpu
def test_set_device_makes_device_local_rank_current(monkeypatch):
    from distconv import backend

    try:
        backend.set_device("gpu")
    except BackendError as exc:
        pytest.skip(f"no GPU: {exc}")
    import cupy

    try:
        count = cupy.cuda.runtime.getDeviceCount()
        # CUDA has read CUDA_VISIBLE_DEVICES by now: only the devices a scheduler named are
        # seen, and without the variable gpu_index no longer gives every rank the one device
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        for local in range(count):
            backend.set_device("gpu", local_rank=local)
            assert cupy.cuda.Device().id == local
            assert backend.to_device([1.0]).device.id == local
        with pytest.raises(BackendError, match=f"needs CUDA device {count}"):
            backend.set_device("gpu", local_rank=count)
    finally:
        cupy.cuda.Device(0).use()
        backend.set_device("cpu")


#: a cupy on a host of four devices whose CUDA, as the real one does, reads
#: ``CUDA_VISIBLE_DEVICES`` once, when it starts; every device made current is logged
_FOUR_DEVICE_CUPY = """
import os
from types import SimpleNamespace

__version__ = "13.6.0"
_seen = []
_current = [0]


class ndarray:
    def __init__(self):
        self.device = Device()


def _count():
    if not _seen:
        named = os.environ.get("CUDA_VISIBLE_DEVICES")
        _seen.append(4 if named is None else len([d for d in named.split(",") if d.strip()]))
    return _seen[0]


class Device:
    def __init__(self, i=None):
        self.id = _current[0] if i is None else i

    def use(self):
        if not 0 <= self.id < _count():
            raise RuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
        _current[0] = self.id
        with open(os.environ["DEVICES_USED"], "a") as f:
            f.write(f"{self.id}\\n")


def asarray(a, dtype=None):
    return ndarray()


cuda = SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=_count), Device=Device)
"""


def test_the_device_test_keeps_to_the_device_a_scheduler_named(tmp_path):
    """Removing ``CUDA_VISIBLE_DEVICES`` before CUDA started gave the device test every device
    of the host: under ``CUDA_VISIBLE_DEVICES=2`` on a host of four it made all four current,
    other jobs' ones too."""
    import os
    import subprocess
    from pathlib import Path

    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(_FOUR_DEVICE_CUPY)
    used = tmp_path / "used"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": child_path(tmp_path), "CUDA_VISIBLE_DEVICES": "2"}
    test = f"{Path(__file__).resolve()}::test_set_device_makes_device_local_rank_current"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    proc = subprocess.run(
        [*command, test], cwd=root, env={**env, "DEVICES_USED": str(used)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout, proc.stdout
    assert set(used.read_text().split()) == {"0"}, used.read_text()
