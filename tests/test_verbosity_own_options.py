"""What ``distconv`` takes before its command as ``-v`` or ``-q`` (a flag repeated, a long
option abbreviated as argparse abbreviates it) is its own option (:func:`is_own_option`, which
the launch keeps as train's), and read past by the check that a failed process is a rank of a
training MPI job (:func:`distconv.verbosity.from_command`), as is any other option there."""

from __future__ import annotations

import pytest

from distconv.cli import build_parser
from distconv.verbosity import from_command, is_own_option

#: what distconv's parser takes before its command as -v or -q
FORMS = ["-vv", "-qq", "--verb", "--verbo", "--q", "--qui"]


@pytest.mark.parametrize("option", FORMS)
def test_forms_of_its_own_options_are_read_past(option):
    assert is_own_option(option)
    assert from_command([option, "-v", "train", "--epochs", "1"]) == ["train", "--epochs", "1"]


@pytest.mark.parametrize(
    "word", ["--version", "-h", "--help", "-x", "-vx", "--epochs", "--quieter"]
)
def test_other_options_are_not_its_own_but_are_read_past(word):
    """Another option of distconv's, or none of its: not -q or -v, but a rank whose parse
    failed on it is a rank of the job all the same (none takes a value: the command follows)."""
    assert not is_own_option(word)
    assert from_command([word, "train"]) == ["train"]


def test_the_command_is_the_first_word_without_a_dash():
    assert from_command(["-v", "pserver", "-q", "train"]) == ["pserver", "-q", "train"]
    assert from_command(["train", "-v"]) == ["train", "-v"]
    assert from_command(["-v", "--bogus"]) == []


@pytest.mark.parametrize("option", FORMS)
def test_each_form_is_one_distconv_takes(option):
    args = build_parser().parse_args([option, "train", "--epochs", "1"])
    assert args.command == "train" and (args.quiet or args.verbose)
