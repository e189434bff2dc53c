"""What ``distconv`` takes before its command as ``-v`` or ``-q`` (a flag repeated, a long
option abbreviated as argparse abbreviates it) is read past by the check that a failed process
is a rank of a training MPI job (:func:`distconv.verbosity.after_own_options`)."""

from __future__ import annotations

import pytest

from distconv.cli import build_parser
from distconv.verbosity import after_own_options

#: what distconv's parser takes before its command as -v or -q
FORMS = ["-vv", "-qq", "--verb", "--verbo", "--q", "--qui"]


@pytest.mark.parametrize("option", FORMS)
def test_forms_of_its_own_options_are_read_past(option):
    assert after_own_options([option, "-v", "train", "--epochs", "1"]) == ["train", "--epochs", "1"]


@pytest.mark.parametrize(
    "word", ["--version", "-h", "--help", "-x", "-vx", "--epochs", "--quieter"]
)
def test_other_options_are_not_read_past(word):
    """Another option of distconv's, or none of its."""
    assert after_own_options([word, "train"]) == [word, "train"]


@pytest.mark.parametrize("option", FORMS)
def test_each_form_is_one_distconv_takes(option):
    args = build_parser().parse_args([option, "train", "--epochs", "1"])
    assert args.command == "train" and (args.quiet or args.verbose)
