"""``-- distconv --verb train --epochs 1``: a form of ``-v`` or ``-q`` that distconv takes
before its command (abbreviated, repeated) is kept as train's, as ``-v`` is, and the launch runs
its own train. It was refused as a program's unrecognized ``train``."""

from __future__ import annotations

import pytest

from launcher.commands import Program, UsageError, parse_program


@pytest.mark.parametrize(
    "option, kept", [("--verb", "--verbose"), ("--qu", "--quiet"), ("--q", "--quiet")]
)
def test_an_abbreviated_own_option_before_train_is_trains(option, kept):
    after = ["distconv", option, "train", "--epochs", "1"]
    assert parse_program(after) == Program((kept, "--epochs", "1"), is_train=True)


@pytest.mark.parametrize("option, once", [("-vv", "-v"), ("-qqq", "-q")])
def test_a_repeated_one_is_taken_as_distconv_train_takes_it(option, once):
    """``distconv -vv train`` and ``distconv train -vv`` run; the launch refused both (``distconv
    train takes no -vv``), after ``distconv`` as alone after ``--``."""
    for after in ([option, "--epochs", "1"], ["distconv", option, "train", "--epochs", "1"]):
        assert parse_program(after) == Program((once, "--epochs", "1"), is_train=True)
    assert parse_program(["--epochs", "1", option]).argv == ("--epochs", "1", once)


def test_refused_together_as_distconv_refuses_them():
    """``-qv``: -q and -v at once, which distconv refuses too."""
    with pytest.raises(UsageError):
        parse_program(["distconv", "-qv", "train", "--epochs", "1"])
