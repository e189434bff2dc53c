"""``distconv-launch k8s -- --timeout 0.1``: refused as ``distconv-launch local`` refuses it, in
the same words (below a shard's least, 0.2 s).

The renderer gives the shards the workers' ``--timeout``. Below a shard's least it raised the
shards' to 0.2 in silence, where the local launch refused the same train arguments: the workers
of a rendered job waited 0.15 s for a shard's reply, its shards 0.2 s for every worker, and
every worker warned at setup that it would give up on its shards first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.deploy import render_manifests
from distconv.shard_timeout import below_the_shards_least
from tests.deploy.hand_edits import (
    DEMO_JOB,
    DEMO_SHARDS_FILE,
    DEMO_WORKERS_FILE,
    container_args,
    rendered_demo,
)
from tests.deploy.test_check_manifests_command import check
from tests.deploy.test_manifests import validate
from tests.launcher.launch_cli import launch

pytestmark = pytest.mark.timeout(120)


def _refusal(*argv: str, cwd: Path) -> str:
    """The one line on stderr with which the launcher refuses ``argv``, having written nothing
    on stdout nor in ``cwd`` (no manifest, no run)."""
    done = launch(*argv, cwd=cwd)
    assert done.returncode != 0, done.stdout[-2000:]
    assert done.stdout == "" and sorted(cwd.iterdir()) == [], sorted(cwd.iterdir())
    (line,) = done.stderr.splitlines()
    return line


@pytest.mark.parametrize("timeout", ["0.05", "0.1999999"])
def test_the_render_refuses_a_timeout_below_the_shards_least_as_local_does(
    tmp_path: Path, timeout: str
):
    train = ("--", "--data", "synthetic", "--epochs", "1", "--timeout", timeout)
    (tmp_path / "k8s").mkdir()
    (tmp_path / "local").mkdir()
    rendered = _refusal("k8s", *DEMO_JOB, "--out", "out", *train, cwd=tmp_path / "k8s")
    started = _refusal("local", "--workers", "2", "--servers", "1", "--insecure", "--run-dir",
                       "run", *train, cwd=tmp_path / "local")  # fmt: skip
    why = below_the_shards_least(float(timeout))
    assert why is not None and why.startswith(f"--timeout {timeout} is below 0.2 s")
    assert rendered == f"distconv-launch k8s: error: {why} (the train arguments after --)"
    assert started == f"distconv-launch local: error: {why}"


@pytest.mark.parametrize("train", [["--timeout", "0.05"], ["--tim=0.05"], ["--timeout=0.05"]])
def test_render_manifests_refuses_it_in_every_form_train_reads(train: list[str]):
    for mode in ("sync", "async"):
        with pytest.raises(ValueError, match=r"^--timeout 0\.05 is below 0\.2 s, the least"):
            render_manifests(job_name="w", workers=2, servers=1, image="d:1", mode=mode,
                             train_args=train)  # fmt: skip


def test_an_mpijob_has_no_shards_and_renders_it():
    """An MPIJob's ranks give their ``--timeout`` to their watchdog alone."""
    (mpijob,) = render_manifests(
        job_name="m", workers=2, servers=0, image="d:1", train_args=["--timeout", "0.05"]
    )
    validate(mpijob)


def test_the_least_itself_renders_to_shards_and_workers_that_agree(tmp_path: Path):
    out = rendered_demo(tmp_path, "0.2")
    for name in (DEMO_SHARDS_FILE, DEMO_WORKERS_FILE):
        args = container_args(out / name)
        assert args[args.index("--timeout") + 1] == "0.2", name
    assert check(str(out)) == (0, "no problems\n", "")
