"""``sudo``, ``doas`` and ``setpriv --reset-env`` start their command in an environment of
their own (sudo's ``env_reset``, on by default, keeps only ``PATH``, ``HOME``, ``TERM`` and
what the image's sudoers keeps; doas likewise, but for ``keepenv``), not the pod's. b39eb8a
read past them as wrappers, and a shell's string behind them had its ``$NAME`` filled in from
the pod's ``env``: ``sudo -u app sh -c "exec distconv train ... --sync ${S:-local}"`` beside a
pod ``S=pserver`` was refused as a second Job of the shards' ranks, though the shell sees no
``S`` and trains locally (review k331). Only the image knows which variables such a shell
keeps: none of the pod's is filled in, while one that a wrapper after ``sudo`` gives (``sudo
env S=b``) is."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import shell_command
from tests.deploy.test_shell_behind_env import _wrapped

pytestmark = pytest.mark.timeout(60)

_LINE = ["sh", "-c", "exec run --sync $S"]


@pytest.mark.parametrize(
    "wrappers",
    [
        ["sudo", "-u", "app"],
        ["doas", "-u", "app"],
        ["env", "S=b", "sudo"],
        ["sudo", "-E"],
        ["setpriv", "--reuid", "1000", "--reset-env"],
    ],
    ids=["sudo", "doas", "env-before-sudo", "sudo-preserve-env", "setpriv-reset-env"],
)
def test_the_pods_variables_are_not_filled_in_behind_sudo(wrappers):
    """What sudo keeps is the image's sudoers' to say (``-E`` too): the string is left unread."""
    assert shell_command([*wrappers, *_LINE], set(), {"S": "pserver"}, {"S"}) is None


def test_setpriv_that_keeps_the_environment_fills_in_the_pods():
    argv = ["setpriv", "--reuid", "1000", *_LINE]
    filled = shell_command(argv, set(), {"S": "pserver"}, {"S"})
    assert filled == ["setpriv", "--reuid", "1000", "run", "--sync", "pserver"]


def test_a_value_a_wrapper_after_sudo_gives_is_filled_in():
    argv = ["sudo", "-u", "app", "env", "S=b", *_LINE]
    filled = shell_command(argv, set(), {"S": "pserver"}, {"S"})
    assert filled == ["sudo", "-u", "app", "env", "S=b", "run", "--sync", "b"]


def test_a_sync_the_pods_env_would_give_is_not_the_ranks_behind_sudo():
    """The shell behind sudo sees no ``S``: ``${S:-local}`` is a local baseline's."""
    manifests = _wrapped(["sudo", "-u", "app"], "pserver")
    container = manifests[-1]["spec"]["containers"][0]
    container["command"][-1] = container["command"][-1].replace("$S", "${S:-local}")
    assert manifest_problems(manifests) == []
