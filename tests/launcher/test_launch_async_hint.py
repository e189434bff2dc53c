"""``distconv-launch ... -- --mode async`` is told where asynchronous SGD is set, as
``distconv train --mode async`` is (:data:`distconv.async_hint.ASYNC_WORDS`).

It said only ``distconv train takes no --mode``, with no word of the launcher's own ``--mode
async`` (and ``--max-staleness``), before ``--``; so did ``mpi -np 2 --mode async``, whose
launch has no such flag.
"""

from __future__ import annotations

import argparse

import pytest

from distconv.async_hint import ASYNC_HINT as TRAIN_HINT
from distconv.async_hint import async_flag
from launcher.commands import LaunchError, parse_program
from launcher.owned import ASYNC_HINT
from tests.launcher.launch_cli import usage_refusal

#: the mpi launches here run on this host, not a batch system's
pytestmark = pytest.mark.usefixtures("no_batch_hosts")


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


@pytest.mark.parametrize(
    "after, hinted",
    [
        (["--no-such-flag"], False),
        (["--model", "cnn"], False),  # spelled as --mode is, then more: no abbreviation of it
        (["--out", "async", "--no-such-flag"], False),  # the word async, a value, is no flag
        (["--out", "x", "--async"], True),  # the same line, its flag one of the words
        (["--no-such-flag", "--max_staleness=1"], True),  # a later word, with its value
        (["--epochs", "1", "--sync", "async"], True),  # the transport asked for it
        (["--sync=Asynchronous"], True),
        (["--sync", "pserver", "--epochs", "0"], False),  # a transport's name, another refusal
        (["--mo", "async"], True),  # --mode's start, as argparse would take it
        (["--epochs", "1", "--ma=2"], True),  # --max-staleness's (and --max_staleness's)
        (["--syn", "async"], True),  # --sync's, as train's parser takes it
        (["--s", "async"], False),  # --seed, --sync, --staleness...: argparse takes none
        (["--stal", "3", "--no-such-flag"], False),  # --stall-seconds or --staleness: none
    ],
    ids=[
        *("unrelated", "longer-flag", "value", "flag", "later-flag", "sync", "sync=", "transport"),
        *("mode-start", "staleness-start", "sync-start", "several", "train-or-async"),
    ],
)
def test_the_async_hint_is_for_an_async_flag_alone(after: list[str], hinted: bool):
    """The hint's edge, both sides of it: an earlier test of an unrelated flag alone passed with the
    hint or without it (no hint at all); here the rows that get it fail without it, and those
    that must not get it (a flag spelled as ``--mode`` then more, the word ``async`` as
    another flag's value) fail where the words are matched too loosely. ``--sync async``,
    refused by train's parser as no transport's name, got no hint."""
    with pytest.raises(LaunchError) as refused:
        parse_program(after)
    assert (ASYNC_HINT in str(refused.value)) is hinted, str(refused.value)
    assert TRAIN_HINT not in str(refused.value)  # the launcher's hint only, not train's too


def test_an_async_word_before_the_dashes_of_a_launch_without_it_is_told_where_it_goes(
    capsys: pytest.CaptureFixture[str],
):
    """Told the launch that takes it: a local one of its ranks, with shards (tried in
    :mod:`tests.launcher.test_launch_async_hint_accepted`)."""
    said = usage_refusal(capsys, "mpi", "-np", "2", "--mode", "async")
    assert said == (
        "distconv-launch mpi: error: unrecognized arguments: --mode async (asynchronous SGD is "
        "the shards' setting, a flag of the launcher's before --: distconv-launch local "
        "--workers 2 --servers 1 --mode async)"
    )


@pytest.mark.parametrize(
    "after, dropped",
    [
        (["--mode", "sync"], "--mode sync"),
        (["--epochs", "1", "--mo=sync"], "--mo=sync"),  # abbreviated, its value in it
        (["--mode", "--epochs", "1"], "--mode"),  # no value: no async asked either
    ],
    ids=["mode-sync", "abbreviated", "no-value"],
)
def test_a_mode_sync_after_the_dashes_is_told_sync_is_the_default(after, dropped):
    """``-- --mode sync`` was told where asynchronous SGD is set, though sync was asked:
    ``--mode`` counts only where its value is async, as ``--sync``'s does."""
    from distconv.async_hint import SYNC_HINT

    with pytest.raises(LaunchError) as refused:
        parse_program(after)
    said = str(refused.value)
    assert ASYNC_HINT not in said and said.endswith(f"; {SYNC_HINT}: drop {dropped})"), said


def test_a_mode_sync_before_the_dashes_of_mpi_is_told_sync_is_the_default(capsys):
    """``mpi -np 2 --mode sync`` (no flag of mpi's) was told to launch local with async."""
    said = usage_refusal(capsys, "mpi", "-np", "2", "--mode", "sync")
    assert said == (
        "distconv-launch mpi: error: unrecognized arguments: --mode sync (synchronous SGD is "
        "the shards' default: drop --mode sync)"
    )


def test_a_negative_mode_value_is_told_dropped_with_its_flag():
    """'-- --mode -4' was told 'drop --mode', its -4 left behind to be refused next: the
    test of the sync words read '-4' as no value, unlike the async hint's launch, which
    takes '--staleness -4' whole. One reading of a flag's value serves both."""
    with pytest.raises(LaunchError) as refused:
        parse_program(["--mode", "-4", "--epochs", "1"])
    assert str(refused.value).endswith("synchronous SGD is the shards' default: drop --mode -4)")


@pytest.mark.parametrize(
    "after",
    ["-.5", "-1e3", "-4", "-1.5", "-inf", "-", "-x y", "--epochs", "3", "-1_0"]
    + ["-q y", "--epochs=a b", "--epo x", "--epo=a b", "--nope x"],
)
def test_a_flags_next_word_is_its_value_where_argparse_reads_it_so(after: str):
    """The next word was a value where it began with a digit after its dash: '-1e3', '-inf' and
    '-1_0' were taken as values (argparse reads them as options), '-.5', '-' and '-x y' were
    not (argparse takes them as values); then a word with a space was taken as a value though
    it names one of train's options ('-q y', '--epochs=a b', '--epo=a b': argparse asks
    that first; '--epo x' is a value). A real parser of this Python, with some of train's
    options, is the judge."""
    parser = argparse.ArgumentParser(exit_on_error=False, add_help=False)
    parser.add_argument("--staleness")
    parser.add_argument("--epochs")
    parser.add_argument("-q", action="store_true")
    try:
        took = parser.parse_known_args(["--staleness", after])[0].staleness == after
    except argparse.ArgumentError:  # expected one argument: the next word is an option
        took = False
    assert async_flag("--staleness", after)[2] == took
