"""``distconv train`` named where the launch runs it itself (found in review): after ``--`` it is
the launch's own train, its words dropped as a leading ``train`` is, so the launch's ``--out``
and checks apply; before ``--`` the hint shows the working form; k8s says which of the two
slips it is, not "put the program in the image"."""

from __future__ import annotations

import sys

import pytest

from launcher.commands import LaunchError, Program, UsageError, parse_program
from tests.launcher.test_launch_k8s import needs_renderer


@pytest.mark.parametrize(
    "after, train",
    [
        (["distconv", "train", "--epochs", "1"], ("--epochs", "1")),
        (["distconv", "-q", "train", "--epochs", "1"], ("-q", "--epochs", "1")),
        (["distconv", "-v", "train", "--epochs", "1"], ("-v", "--epochs", "1")),
        (["distconv", "--epochs", "1"], ("--epochs", "1")),  # distconv's default command
        (["distconv"], ()),
        ([sys.executable, "-m", "distconv", "train", "--epochs", "1"], ("--epochs", "1")),
    ],
    ids=["train", "quiet", "verbose", "flag", "alone", "python-m"],
)
def test_distconv_train_after_the_dashes_is_the_launchs_own_train(after, train):
    """``-- distconv train --epochs 1`` ran distconv as a program of the user's in every
    worker: its run in ./runs, not the run directory, and none of the launch's checks."""
    assert parse_program(after) == Program(train, is_train=True)


def test_another_distconv_command_after_the_dashes_stays_a_program_of_the_users():
    assert not parse_program(["distconv", "-q", "keys", "out"]).is_train


@pytest.mark.parametrize(
    "argv, said",
    [
        (["mpi", "-np", "2", "--", "distconv", "train", "--rank", "1"], "--rank after --"),
        (["local", "--workers", "2", "--servers", "1", "--", "distconv", "train", "--sync",
          "async"], "--mode async --max-staleness N"),  # the async hint
        (["mpi", "-np", "2", "--", "distconv", "--epochs", "-1"], "argument --epochs"),
    ],
    ids=["owned", "sync", "value"],
)  # fmt: skip
def test_distconv_train_after_the_dashes_gets_the_launchs_checks(argv, said):
    """What run_local and run_mpi check first, in process: before, every rank (or worker,
    after the shards started) failed with distconv's own error."""
    from launcher.cli import build_parser
    from launcher.options import parse_own, split_argv
    from launcher.owned import refuse_after_dashes

    own, rest = split_argv(argv)
    args = parse_own(build_parser(), own, rest)
    with pytest.raises(UsageError) as refused:
        refuse_after_dashes(args, parse_program(rest))
    assert said in str(refused.value)


def k8s_refusal(*after: str) -> UsageError | LaunchError | None:
    """What ``distconv-launch k8s --workers 2 --image d:1 -- AFTER`` refuses, checked in process
    (:func:`launcher.k8s.checked_manifests`, as the command runs it); None where it renders."""
    from launcher.cli import build_parser
    from launcher.k8s import checked_manifests
    from launcher.options import parse_own

    own = ["k8s", "--workers", "2", "--servers", "0", "--image", "d:1"]
    try:
        checked_manifests(parse_own(build_parser(), own, list(after)), list(after))
    except LaunchError as exc:
        return exc
    return None


@needs_renderer
def test_k8s_tells_a_train_slip_from_a_program_to_put_in_the_image():
    """``-- epochs 2`` and ``-- distconv train ...`` were told "put the program in the image"
    (exit 1): the first is a flag's dashes left out, a usage error; the second renders."""
    slip = k8s_refusal("epochs", "2")
    assert isinstance(slip, UsageError)  # exit 2, as the train args' other slips
    assert str(slip) == (
        "'epochs' is neither a program on PATH nor a .py file; distconv train arguments start "
        "with an option: did you mean -- --epochs 2? (k8s renders distconv train jobs: a "
        "program of yours goes in the image)"
    )
    assert k8s_refusal("distconv", "train", "--epochs", "2") is None
    program = k8s_refusal("ls")  # a program indeed: still a manifest problem, exit 1
    assert type(program) is LaunchError and "put the program in the image" in str(program)
