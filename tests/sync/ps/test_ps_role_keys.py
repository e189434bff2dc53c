"""Each host of a job holds only its role's key files, as docs/operations.md says to copy them:
a shard server.key_secret and every worker-*.key, worker R server.key and worker-R.key_secret.

A missing one named where it comes from: "(make keys with `distconv keys`)" made, on several
hosts, a set the shards (or the workers) do not know, and the job then failed at every
handshake; the way out is to copy the missing file from the job's set. Real shard, worker and
``distconv train`` processes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ps_helpers import batches, run_pserver, run_ranks, small_net, train_steps

from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync
from tests.child_env import child_env

KEY_SET = "the job's key set (made once with `distconv keys`)"


def _role_keys(job_keys: str, folder: Path, names: list[str]) -> Path:
    """``folder`` holding only ``names`` of the job's key set, as one host's copy."""
    folder.mkdir(mode=0o700)
    for name in names:
        target = folder / name
        target.write_bytes((Path(job_keys) / name).read_bytes())
        target.chmod(0o600)
    return folder


SHARD_FILES = ["server.key_secret", "worker-0.key", "worker-1.key"]


@pytest.mark.timeout(120)
def test_a_job_trains_with_each_host_holding_its_roles_files_alone(shards, job_keys, tmp_path):
    shard_keys = _role_keys(job_keys, tmp_path / "shard", SHARD_FILES)
    (endpoint,) = shards.start(1, workers=2, keys=str(shard_keys))

    def worker(rank: int) -> None:
        names = ["server.key", f"worker-{rank}.key_secret"]
        keys = _role_keys(job_keys, tmp_path / f"worker{rank}", names)
        sync = PServerSync(
            create_optimizer("sgd", lr=0.05), rank=rank, world_size=2, pservers=[endpoint],
            keys_dir=str(keys), timeout=20,
        )  # fmt: skip
        net = small_net()
        try:
            sync.setup(net.parameters(), {"batch": 8})
            train_steps(net, sync, batches(2, 8), rank, 2)
        finally:
            sync.close()

    run_ranks(worker, 2)


@pytest.mark.timeout(120)
def test_a_worker_without_its_secret_is_told_to_copy_it_from_the_key_set(job_keys, tmp_path):
    keys = _role_keys(job_keys, tmp_path / "keys", ["server.key"])
    done = subprocess.run(
        [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--epochs", "1",
         "--sync", "pserver", "--pservers", "127.0.0.1:9", "--rank", "1", "--world-size", "2",
         "--keys", str(keys), "--out", str(tmp_path / "out"), "--no-progress"],
        capture_output=True, text=True, timeout=100, env=child_env(),
    )  # fmt: skip
    assert done.returncode == 1, done
    missing = keys / "worker-1.key_secret"
    assert done.stderr.strip().splitlines()[-1] == (
        "distconv train: error: RuntimeConfigError: CURVE key file "
        f"{missing} not found: copy this rank's worker-1.key_secret from {KEY_SET}"
    ), done.stderr


@pytest.mark.timeout(120)
def test_a_shard_without_its_secret_is_told_to_copy_it_from_the_key_set(job_keys, tmp_path):
    keys = _role_keys(job_keys, tmp_path / "keys", SHARD_FILES[1:])
    done = run_pserver("--keys", str(keys), "--workers", "2", timeout=100)
    assert done.returncode == 1, done
    assert done.stderr.strip() == (
        f"distconv pserver: error: CURVE key file {keys / 'server.key_secret'} not found: "
        f"copy server.key_secret from {KEY_SET}"
    ), done.stderr
