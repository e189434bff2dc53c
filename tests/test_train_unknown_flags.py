"""``distconv train`` refuses a flag it does not take with its own usage, and points an
async-SGD guess at the shards' ``--mode async``: argparse left train's leftovers to the
top-level parser, whose ``usage: distconv [-h] [--version] [-q] COMMAND ...`` named no flag of
train's."""

from __future__ import annotations

import pytest

from distconv.async_hint import ASYNC_HINT
from distconv.train_args import parse_train_values, train_parser
from tests.test_cli import distconv

pytestmark = pytest.mark.timeout(60)


def test_an_unknown_train_flag_gets_trains_usage_and_an_async_hint():
    result = distconv("train", "--async", "--max-staleness", "0")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: distconv train [-h]"), result.stderr
    assert (
        f"distconv train: error: unrecognized arguments: --async --max-staleness 0 ({ASYNC_HINT})"
    ) in result.stderr


def test_a_refusal_hook_hears_the_unknown_flag_and_another_gets_no_hint():
    def refuse(message: str):
        raise ValueError(message)

    with pytest.raises(ValueError, match=r"^unrecognized arguments: --bogus 3$"):
        parse_train_values(["--bogus", "3"], refuse, "no help")


def test_the_async_hint_names_the_launchers_staleness_flag_which_it_takes():
    """``distconv-launch local`` and ``k8s`` take ``--max-staleness``: the hint
    named only their ``--mode async``, so a staleness sweep read as shards started by hand."""
    from launcher.cli import build_parser
    from launcher.options import parse_own

    named = ASYNC_HINT.split("or distconv-launch ", 1)[1]
    assert named == "local (or k8s) --mode async --max-staleness S", ASYNC_HINT
    flags = named.split(") ", 1)[1].replace("S", "3").split()
    for command in (["local", "--workers", "2"], ["k8s", "--workers", "2", "--image", "d:1"]):
        assert parse_own(build_parser(), [*command, *flags]).max_staleness == 3


def test_sync_async_given_to_train_itself_gets_the_async_hint():
    """``distconv train --sync async`` got only argparse's ``invalid choice``, though ``--mode
    async`` there and ``distconv-launch local -- --sync async`` were told where asynchronous
    SGD is set."""
    result = distconv("train", "--sync", "async", "--epochs", "1")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: distconv train [-h]"), result.stderr
    assert result.stderr.splitlines()[-1] == (
        "distconv train: error: argument --sync: invalid choice: 'async' (choose from 'local', "
        f"'mpi', 'pserver') ({ASYNC_HINT})"
    )


@pytest.mark.parametrize(
    "argv, hinted",
    [
        (["--sync=Asynchronous"], True),
        (["--epochs", "0", "--max-staleness=2"], True),  # another refusal, async asked too
        (["--sync", "pserver", "--epochs", "0"], False),  # a transport's name
        (["--out", "async", "--epochs", "0"], False),  # the word as another flag's value
        (["--sync", "mpi", "--bogus", "async"], False),
        (["--mo", "async"], True),  # --mode's start, which argparse would read as it
        (["--mode", "sync"], False),  # sync asked: the shards' default
    ],
    ids=[
        *("sync=", "staleness", "transport", "value", "unknown-then-value", "mode-start"),
        "mode-sync",
    ],
)
def test_trains_refusals_hint_at_async_as_the_launchers_do(
    argv: list[str], hinted: bool, capsys: pytest.CaptureFixture[str]
):
    """One test of a word that means async (:func:`distconv.async_hint.asks_async`), shared
    with :func:`launcher.owned.async_hint`: the rows agree with the launcher's."""
    from launcher.owned import ASYNC_HINT as LAUNCH_HINT
    from launcher.owned import async_hint

    with pytest.raises(SystemExit):
        train_parser().parse_args(argv)
    said = capsys.readouterr().err.splitlines()[-1]
    assert said.endswith(f" ({ASYNC_HINT})") is hinted, said
    assert (LAUNCH_HINT in async_hint(argv)) is hinted


@pytest.mark.parametrize("argv", [["--syn", "async"], ["--sy=Async", "--epochs", "1"]])
def test_an_abbreviated_sync_asking_for_async_is_hinted_as_the_launcher_hints_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
):
    """``distconv train --syn async`` is ``--sync async`` to argparse, and the launcher's
    ``-- --syn async`` (spelled out first) was hinted, train's own refusal not."""
    from launcher.commands import UsageError, parse_program
    from launcher.owned import ASYNC_HINT as LAUNCHER_HINT

    with pytest.raises(SystemExit):
        train_parser().parse_args(argv)
    said = capsys.readouterr().err.splitlines()[-1]
    assert said.endswith(f" ({ASYNC_HINT})"), said
    with pytest.raises(UsageError, match=LAUNCHER_HINT.split(":")[0]):
        parse_program(argv)
