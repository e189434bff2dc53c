"""A mistyped flag of the launcher's own is named as such, not sent after ``--``.

With a program after ``--``, any flag before it that no option took was told to go after the
program's name: ``distconv-launch local --workers 2 --max-restrts 2 -- python job.py`` showed
``distconv-launch local --workers 2 -- python job.py --max-restrts 2``, the launcher's own
restarts handed to the user's program as its arguments."""

from __future__ import annotations

import pytest

from launcher.cli import build_parser
from launcher.options import parse_own, split_argv


def _refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    own, rest = split_argv(argv)
    with pytest.raises(SystemExit) as stopped:
        parse_own(build_parser(), own, rest)
    assert stopped.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["local", "--workers", "2", "--max-restrts", "2", "--", "python", "job.py"],
            "distconv-launch local: error: unrecognized arguments: --max-restrts 2 (did you "
            "mean --max-restarts?)",
        ),
        (
            ["mpi", "-np", "2", "--run_dir=r", "--", "job.py"],
            "distconv-launch mpi: error: unrecognized arguments: --run_dir=r (did you mean "
            "--run-dir?)",
        ),
        (  # no program: argparse's words had said nothing more
            ["mpi", "-np", "2", "--dryrun"],
            "distconv-launch mpi: error: unrecognized arguments: --dryrun (did you mean "
            "--dry-run?)",
        ),
    ],
    ids=["before-a-program", "with-a-value", "no-program"],
)
def test_a_mistyped_own_flag_is_named_not_moved_after_the_program(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    assert _refusal(capsys, *argv) == said
