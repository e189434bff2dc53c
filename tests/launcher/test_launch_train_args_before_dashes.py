"""Arguments of the workers' given before ``--`` are refused by the command's parser, with where
they go.

``distconv-launch mpi -np 2 --epochs 1`` showed the top-level usage (``distconv-launch [-h]
COMMAND ...``) and ``unrecognized arguments: --epochs 1``, not ``mpi``'s usage, and nothing said
that distconv train's arguments go after ``--``, a new operator's likeliest slip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch

HINT = "distconv train's arguments go after --"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["mpi", "-np", "2", "--epochs", "1"],
            f"unrecognized arguments: --epochs 1 ({HINT}: distconv-launch mpi -np 2 -- --epochs 1)",
        ),
        (  # in the middle of the launcher's own, and with train arguments after -- already
            ["local", "--workers", "2", "--ep", "1", "--servers", "1", "--", "--lr", "0.1"],
            f"unrecognized arguments: --ep 1 ({HINT}: distconv-launch local --workers 2 "
            "--servers 1 -- --ep 1 --lr 0.1)",
        ),
        (  # a program's: after its name
            ["local", "--workers", "1", "--steps", "3", "--", "job.py"],
            "unrecognized arguments: --steps 3 (the program's arguments go after its name, "
            "after --: distconv-launch local --workers 1 -- job.py --steps 3)",
        ),
        (["mpi", "-np", "2", "--nonesuch"], "unrecognized arguments: --nonesuch"),
    ],
    ids=["train-flag", "among-own-flags", "program", "no-one-s-flag"],
)
def test_arguments_no_option_takes_are_refused_by_the_command_with_where_they_go(
    tmp_path: Path, argv: list[str], said: str
):
    done = launch(*argv, cwd=tmp_path, timeout=30)
    assert done.returncode == 2, done.stderr
    command = argv[0]
    assert done.stderr.startswith(f"usage: distconv-launch {command} [-h] "), done.stderr
    assert done.stderr.splitlines()[-1] == f"distconv-launch {command}: error: {said}"
    assert list(tmp_path.iterdir()) == []  # no run directory, nothing started
