"""``distconv train`` named where the launch runs it itself (found by k548): after ``--`` it is
the launch's own train, its words dropped as a leading ``train`` is, so the launch's ``--out``
and checks apply; before ``--`` the hint shows the working form; k8s says which of the two
slips it is, not "put the program in the image"."""

from __future__ import annotations

import sys

import pytest

from launcher.commands import Program, UsageError, parse_program


@pytest.mark.parametrize(
    "after, train",
    [
        (["distconv", "train", "--epochs", "1"], ("--epochs", "1")),
        (["distconv", "-q", "train", "--epochs", "1"], ("-q", "--epochs", "1")),
        (["distconv", "--epochs", "1"], ("--epochs", "1")),  # distconv's default command
        (["distconv"], ()),
        ([sys.executable, "-m", "distconv", "train", "--epochs", "1"], ("--epochs", "1")),
    ],
    ids=["train", "quiet", "flag", "alone", "python-m"],
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
