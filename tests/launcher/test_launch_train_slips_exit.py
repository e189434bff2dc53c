"""A slip in the train arguments after ``--`` is one usage error, exit status 2, whichever
check catches it: ``-- --mode async``, ``-- --max-staleness 2``, ``-- --foo 1`` and a flag the
launch sets itself exited 1, with no usage line, while ``-- --sync async`` and ``-- --epochs
-1`` exited 2. A program the workers cannot start is no usage error: exit 1."""

from __future__ import annotations

import pytest

from launcher.cli import build_parser
from launcher.commands import LaunchError, UsageError, parse_program
from launcher.k8s import checked_manifests
from launcher.owned import refuse_after_dashes
from tests.launcher.launch_cli import launch

SHAPES = {
    "local": ["local", "--workers", "2"],
    "no-shards": ["local", "--workers", "1", "--servers", "0"],
    "mpi": ["mpi", "-np", "2"],
}


@pytest.mark.parametrize(
    "shape, train",
    [
        ("local", ["--mode", "async"]),  # a flag train does not take
        ("local", ["--max-staleness", "2"]),
        ("mpi", ["--foo", "1"]),
        ("local", ["--p", "1"]),  # an abbreviation of several
        ("local", ["--resume", "--overwrite"]),
        ("local", ["--sync", "async"]),  # a value train's parser refuses
        ("local", ["--epochs", "-1"]),
        ("local", ["--rank", "1"]),  # a flag the launch sets
        ("mpi", ["--sync", "pserver"]),
        ("mpi", ["--push-kb", "64"]),  # another transport's
        ("no-shards", ["--bucket-mb", "4"]),
    ],
)
def test_a_train_slip_after_the_dashes_is_a_usage_error(shape: str, train: list[str]):
    args = build_parser().parse_args(SHAPES[shape])
    with pytest.raises(UsageError):
        refuse_after_dashes(args, parse_program(["--epochs", "1", *train]))


K8S = ["k8s", "--workers", "2", "--image", "reg/distconv:1"]


@pytest.mark.parametrize(
    "launch_flags, train",
    [
        ([], ["--rank", "1"]),  # a flag the deployment sets in the pods' environment
        ([], ["--ra", "1"]),
        (["--mpi"], ["--world-size", "3"]),
        ([], ["--overwrite"]),  # one it excludes beside its --resume auto
        ([], ["--sync", "mpi"]),  # one it sets in the pods' arguments
        (["--mpi"], ["--pservers", "a:1"]),
        (["--mpi"], ["--push-kb", "3"]),  # another transport's: the manifests' check said it
        ([], ["--foo", "1"]),  # a flag train does not take (parse_program's, exit 2 already)
    ],
)
def test_a_train_slip_after_the_dashes_of_k8s_is_a_usage_error(launch_flags, train):
    """Under k8s, ``-- --rank 1`` and ``--mpi -- --push-kb 3`` exited 1 (the renderer's and
    the manifests' refusals), while ``-- --foo 1`` and local's ``-- --rank 1`` exit 2."""
    args = build_parser().parse_args([*K8S, *launch_flags])
    with pytest.raises(UsageError):
        checked_manifests(args, ["--epochs", "1", *train])


@pytest.mark.parametrize(
    "launch_flags, train",
    [
        (["--job-name", "Bad_Name"], ["--rank", "1"]),  # the launch's own flag, refused first
        ([], ["--out", "/opt/x"]),  # no flag refused: the manifests would not work
        (["--gpus", "1"], ["--device", "cpu"]),
    ],
)
def test_what_k8s_refuses_of_its_own_flags_or_manifests_is_no_usage_error(launch_flags, train):
    args = build_parser().parse_args([*K8S, *launch_flags])
    with pytest.raises(LaunchError) as refused:
        checked_manifests(args, ["--epochs", "1", *train])
    assert not isinstance(refused.value, UsageError), refused.value


def test_a_program_the_workers_cannot_start_is_no_usage_error(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")  # no execute bit
    args = build_parser().parse_args(SHAPES["local"])
    with pytest.raises(LaunchError) as refused:
        refuse_after_dashes(args, parse_program([str(script)]))
    assert not isinstance(refused.value, UsageError), refused.value


@pytest.mark.timeout(60)
def test_the_launch_exits_2_on_one_line_and_starts_nothing(tmp_path):
    run_dir = tmp_path / "run"
    argv = [*SHAPES["local"], "--run-dir", str(run_dir), "--", "--mode", "async"]
    done = launch(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()  # no usage: the launcher's names no train argument
    assert line.startswith("distconv-launch local: error: distconv train takes no --mode ("), line
    assert not run_dir.exists()
