"""``sudo``, ``doas`` and ``setpriv --reset-env`` start their command in an environment of
their own (sudo's ``env_reset``, on by default, keeps only ``PATH``, ``HOME``, ``TERM`` and
what the image's sudoers keeps; doas likewise, but for ``keepenv``), not the pod's. b39eb8a
read past them as wrappers, and a shell's string behind them had its ``$NAME`` filled in from
the pod's ``env``: ``sudo -u app sh -c "exec distconv train ... --sync ${S:-local}"`` beside a
pod ``S=pserver`` was refused as a second Job of the shards' ranks, though the shell sees no
``S`` and trains locally, unless the image's sudoers keeps it. Only the image
knows which variables such a shell keeps: none of the pod's is filled in as its value (one
that reads otherwise unset is a value only the image knows: see
test_shell_behind_sudo_cautious.py), while one that a wrapper after ``sudo`` gives (``sudo env
S=b``) is."""

from __future__ import annotations

import pytest

from distconv.deploy.check_shards import _is_filled
from distconv.deploy.shell import shell_command

pytestmark = pytest.mark.timeout(60)

_LINE = ["sh", "-c", "exec run --sync $S"]


@pytest.mark.parametrize(
    "wrappers",
    [["sudo", "-u", "app"], ["doas", "-u", "app"], ["env", "S=b", "sudo"], ["sudo", "-E"]],
    ids=["sudo", "doas", "env-before-sudo", "sudo-preserve-env"],
)
def test_the_pods_variables_are_not_filled_in_behind_sudo(wrappers):
    """What sudo keeps is the image's sudoers' to say (``-E`` too): ``$S``, the pod's value or
    nothing, is a value only the image knows, as is an env's before sudo, which
    sudo may keep or not (test_shell_env_before_sudo.py)."""
    filled = shell_command([*wrappers, *_LINE], set(), {"S": "pserver"}, {"S"})
    assert filled is not None and filled[-3:-1] == ["run", "--sync"]
    assert _is_filled(filled[-1])


def test_setpriv_that_resets_the_environment_leaves_the_pods_variables_unset():
    """``S=pserver setpriv --reset-env dash -c 'echo "[$S]"'`` prints ``[]``."""
    argv = ["setpriv", "--reuid", "1000", "--reset-env", *_LINE]
    filled = shell_command(argv, set(), {"S": "pserver"}, {"S"})
    assert filled == ["setpriv", "--reuid", "1000", "--reset-env", "run", "--sync"]


def test_setpriv_that_keeps_the_environment_fills_in_the_pods():
    argv = ["setpriv", "--reuid", "1000", *_LINE]
    filled = shell_command(argv, set(), {"S": "pserver"}, {"S"})
    assert filled == ["setpriv", "--reuid", "1000", "run", "--sync", "pserver"]


def test_a_value_a_wrapper_after_sudo_gives_is_filled_in():
    argv = ["sudo", "-u", "app", "env", "S=b", *_LINE]
    filled = shell_command(argv, set(), {"S": "pserver"}, {"S"})
    assert filled == ["sudo", "-u", "app", "env", "S=b", "run", "--sync", "b"]
