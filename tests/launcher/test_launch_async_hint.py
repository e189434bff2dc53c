"""``distconv-launch ... -- --mode async`` is told where asynchronous SGD is set, as
``distconv train --mode async`` is (:data:`distconv.train_args.ASYNC_WORDS`).

It said only ``distconv train takes no --mode``, with no word of the launcher's own ``--mode
async`` (and ``--max-staleness``), before ``--``; so did ``mpi -np 2 --mode async``, whose
launch has no such flag (k525).
"""

from __future__ import annotations

import pytest

from launcher.cli import build_parser
from launcher.commands import LaunchError, parse_program
from launcher.options import parse_own, split_argv
from launcher.owned import ASYNC_HINT


@pytest.mark.parametrize(
    "after",
    [["--mode", "async"], ["--epochs", "1", "--max-staleness=0"], ["--async"]],
    ids=["mode", "staleness-later", "async"],
)
def test_an_async_word_after_the_dashes_is_told_the_launchers_flag(after: list[str]):
    with pytest.raises(LaunchError) as refused:
        parse_program(after)
    assert str(refused.value).endswith(
        f"(the arguments after -- are distconv train's; {ASYNC_HINT})"
    )


def test_another_unknown_train_flag_gets_no_async_hint():
    with pytest.raises(LaunchError) as refused:
        parse_program(["--no-such-flag"])
    assert "asynchronous" not in str(refused.value)


def test_an_async_word_before_the_dashes_of_a_launch_without_it_is_told_where_it_goes(
    capsys: pytest.CaptureFixture[str],
):
    own, rest = split_argv(["mpi", "-np", "2", "--mode", "async"])
    with pytest.raises(SystemExit):
        parse_own(build_parser(), own, rest)
    said = capsys.readouterr().err.splitlines()[-1]
    assert (
        said == f"distconv-launch mpi: error: unrecognized arguments: --mode async ({ASYNC_HINT})"
    )
