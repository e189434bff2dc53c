"""The renderer judges the launch's own flags before the ``distconv train`` arguments after
``--``: an MPIJob given shards and a ``--rank`` the deployment sets was refused for the
``--rank`` alone, with exit 1 (the launch's own flags were wrong too), so the line named a
train argument and never the slip that blocked the launch, which the operator met only on
the next try."""

from __future__ import annotations

import pytest

from distconv.deploy.render import render_manifests
from tests.launcher.launch_cli import launch

pytestmark = pytest.mark.timeout(120)

SHARDS_ON_AN_MPIJOB = "an MPIJob (--mpi) runs allreduce without shards, not --servers 2"


@pytest.mark.parametrize(
    "train", [["--rank", "1"], ["--sync", "local"], ["--epochs", "-1"], ["--bogus"]]
)
def test_the_launchs_own_flags_are_refused_before_the_train_arguments(train):
    with pytest.raises(ValueError, match=r"^an MPIJob \(--mpi\) runs allreduce without shards"):
        render_manifests(
            job_name="j", workers=2, servers=2, image="d:1", mpi=True, train_args=train
        )


def test_the_launch_names_its_own_slip_first(tmp_path):
    done = launch("k8s", "--mpi", "--servers", "2", "--workers", "2", "--image", "d:1",
                  "--", "--rank", "1", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"distconv-launch k8s: error: {SHARDS_ON_AN_MPIJOB}\n"
    assert list(tmp_path.iterdir()) == []
