"""``distconv-launch k8s`` refuses train arguments after ``--`` with a usage error, exit 2, as
``distconv-launch local`` does: a workers' ``--timeout`` below a shard's least exited 1 from
k8s (the renderer's ValueError became a plain launch error) and 2 from local, the same slip.
A refusal of the launch's own flags stays exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch

pytestmark = pytest.mark.timeout(120)

#: a parameter-server job of two workers and one shard
SHARDED = ("--workers", "2", "--servers", "1")
BELOW_THE_LEAST = ("--", "--data", "synthetic", "--epochs", "1", "--timeout", "0.1")


def _refused(*argv: str, cwd: Path) -> tuple[int, str]:
    """The exit status and the one stderr line of the launch of ``argv``, which starts nothing:
    no output on stdout, nothing written in ``cwd``."""
    cwd.mkdir()
    done = launch(*argv, cwd=cwd)
    assert done.stdout == "" and list(cwd.iterdir()) == [], done.stdout[-2000:]
    (line,) = done.stderr.splitlines()
    return done.returncode, line


def test_a_timeout_below_the_shards_least_is_a_usage_error_from_k8s_as_from_local(tmp_path):
    rendered = _refused("k8s", *SHARDED, "--image", "d:1", *BELOW_THE_LEAST, cwd=tmp_path / "k")
    started = _refused("local", *SHARDED, "--insecure", "--run-dir", "run", *BELOW_THE_LEAST,
                       cwd=tmp_path / "l")  # fmt: skip
    assert rendered[0] == started[0] == 2, (rendered, started)
    assert rendered[1].startswith("distconv-launch k8s: error: --timeout 0.1 is below 0.2 s")


def test_an_mpijobs_timeout_past_its_stall_limit_is_a_usage_error(tmp_path):
    train = ("--", "--epochs", "1", "--timeout", "400", "--stall-seconds", "300")
    status, line = _refused("k8s", "--mpi", "--workers", "2", "--image", "d:1", *train,
                            cwd=tmp_path / "m")  # fmt: skip
    assert status == 2, line
    assert "--timeout 400 is not below their --stall-seconds 300" in line


def test_the_launchs_own_flags_refused_first_stay_exit_1(tmp_path):
    status, line = _refused("k8s", *SHARDED, "--image", "d:1", "--job-name", "Bad_Name",
                            *BELOW_THE_LEAST, cwd=tmp_path / "j")  # fmt: skip
    assert status == 1 and "--job-name must be a DNS label" in line, line


def test_a_refusal_of_the_train_arguments_is_told_by_its_class():
    """Not by its words: each site that refuses the train arguments alone raises
    TrainArgsError, and the launcher's exit status follows the class."""
    from distconv.deploy.render import render_manifests
    from distconv.deploy.train_values import TrainArgsError

    sharded = (["--rank", "1"], ["--overwrite"], ["--sync", "async"], ["--epochs", "-1"],
               ["--timeout", "0.1"], ["--bogus"], ["--s", "1"])  # fmt: skip
    for train in sharded:
        with pytest.raises(TrainArgsError):
            render_manifests(job_name="j", workers=2, servers=1, image="d:1", train_args=train)
    for train in (["--timeout", "400", "--stall-seconds", "300"], ["--stall-seconds", "5e-324"]):
        with pytest.raises(TrainArgsError):
            render_manifests(job_name="j", workers=2, servers=0, image="d:1", train_args=train)


def test_the_launchs_own_flag_refused_beside_a_train_arguments_refusal_stays_exit_1(tmp_path):
    """An MPIJob given shards is refused after the train arguments are, but the launch's own
    flags are wrong too: no usage error of the train arguments alone."""
    status, line = _refused("k8s", "--mpi", "--servers", "2", "--workers", "2", "--image", "d:1",
                            "--", "--timeout", "400", cwd=tmp_path / "s")  # fmt: skip
    assert status == 1, line
