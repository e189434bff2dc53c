"""Behind ``sudo``, ``doas`` or ``setpriv --reset-env`` a shell may keep a pod's variable
(``sudo -E``, a sudoers ``env_keep``, doas's ``keepenv``) or not (sudo's default
``env_reset``): only the image knows. be8c36d left every such ``$NAME`` to the running shell,
so the string was unread and its rank counted with no one: ``sudo -u app sh -c "exec distconv
train ... --sync ${S:-pserver}"`` beside a pod ``S=pserver``, the shards' rank whether sudo
keeps ``S`` or not, was no longer refused as a second Job of the shards' ranks, nor was
``--sync $S``. A variable that reads the same either way is filled in; one that
does not is a value only the cluster knows, which the count takes for the shards'; behind
``setpriv --reset-env``, which keeps none, it reads as unset."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.check_shards import _is_filled
from distconv.deploy.shell import shell_command
from tests.deploy.test_programs_shell_sync import _CLAIMED
from tests.deploy.test_shell_behind_env import _wrapped

pytestmark = pytest.mark.timeout(60)

_UNKNOWN = (
    " (Pod j-w0: --sync, or DISTCONV_PSERVERS, is known only to the cluster, and is taken "
    "for the shards' transport)"
)
_RESETS = [["sudo", "-u", "app"], ["doas", "-u", "app"], ["setpriv", "--reset-env"]]


def _behind(wrappers: list[str], sync: str, pods: str) -> list[dict]:
    """:func:`_wrapped`, its string's ``--sync`` written as ``sync``."""
    manifests = _wrapped(wrappers, pods)
    container = manifests[-1]["spec"]["containers"][0]
    container["command"][-1] = container["command"][-1].replace("$S", sync)
    return manifests


@pytest.mark.parametrize("wrappers", _RESETS, ids=["sudo", "doas", "setpriv"])
def test_a_sync_that_reads_the_same_kept_or_not_is_filled_in(wrappers):
    assert manifest_problems(_behind(wrappers, "${S:-pserver}", "pserver")) == [_CLAIMED]


@pytest.mark.parametrize(
    ("sync", "pods"),
    [
        ("$S", "pserver"),
        ('"${S}"', "pserver"),
        ("${S:-local}", "pserver"),
        ("${S:-pserver}", "local"),
    ],
    ids=["bare", "quoted", "default-local", "default-pserver"],
)
def test_a_sync_only_the_image_decides_is_taken_for_the_shards(sync, pods):
    """The pod's value or none: one of them is the shards' transport."""
    assert manifest_problems(_behind(["sudo", "-u", "app"], sync, pods)) == [_CLAIMED + _UNKNOWN]


def test_a_local_sync_either_way_is_no_rank_of_theirs():
    assert manifest_problems(_behind(["sudo", "-u", "app"], "${S:-local}", "local")) == []


@pytest.mark.parametrize(
    ("sync", "pods", "problems"),
    [("${S:-local}", "pserver", []), ("${S:-pserver}", "local", [_CLAIMED])],
    ids=["default-local", "default-pserver"],
)
def test_setpriv_that_resets_the_environment_keeps_none_of_the_pods(sync, pods, problems):
    """``S=pserver setpriv --reset-env dash -c 'echo ${S:-local}'`` prints ``local``."""
    assert manifest_problems(_behind(["setpriv", "--reset-env"], sync, pods)) == problems


def test_a_variable_sudo_sets_itself_is_the_images():
    """sudo gives ``HOME`` the target user's: the pod's is no reading of it, and only the
    image knows it (test_shell_behind_sudo_image_values.py)."""
    argv = ["sudo", "-u", "app", "sh", "-c", "exec run --out ${HOME:-/root}"]
    filled = shell_command(argv, set(), {"HOME": "/root"}, {"HOME"})
    assert filled is not None and filled[-2] == "--out" and _is_filled(filled[-1])


def test_the_words_read_behind_sudo():
    """What reads the same kept or not is filled in, the rest is a value no one can judge."""
    argv = ["sudo", "sh", "-c", "exec run ${S:-a} $U ${S:-c} ${S:+d}"]
    filled = shell_command(argv, set(), {"S": "a", "U": "u"}, {"S", "U"})
    assert filled is not None
    assert filled[:3] == ["sudo", "run", "a"]
    assert all(_is_filled(word) for word in filled[3:]) and len(filled) == 6
