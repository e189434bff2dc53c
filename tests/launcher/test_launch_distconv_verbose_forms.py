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


@pytest.mark.parametrize("option", ["-vv", "-qq"])
def test_a_repeated_one_is_refused_as_train_refuses_it(option):
    """As ``-- -vv --epochs 1`` is: not as a program's unrecognized ``train``."""
    with pytest.raises(UsageError) as alone:
        parse_program([option, "--epochs", "1"])
    with pytest.raises(UsageError) as named:
        parse_program(["distconv", option, "train", "--epochs", "1"])
    assert str(named.value) == str(alone.value)
