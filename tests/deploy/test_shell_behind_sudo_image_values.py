"""``sudo``, ``doas`` and ``setpriv --reset-env`` set ``HOME``, ``USER``, ``LOGNAME``,
``SHELL`` and ``PATH`` (sudo ``MAIL`` too) to the target user's, whatever the pod's are:
``S=x HOME=/h setpriv --reset-env dash -c 'echo "[$HOME] [${HOME:+set}]"'`` prints ``[/root]
[set]``. 4fd95ef left a ``$HOME`` behind them to the running shell, so the string was unread,
and an unread string's rank is counted with no one: ``sudo -u app sh -c "exec distconv train
--sync pserver ... --keys $HOME/keys"`` beside the worker Job passed, where the same line
without sudo is refused as a second Job of the shards' ranks. Such a variable is
set, to a value only the image (its passwd) knows: the checks' stand-in, as a ``valueFrom``'s."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.check_shards import _is_filled
from distconv.deploy.shell import shell_command
from tests.deploy.test_programs_shell_sync import _CLAIMED
from tests.deploy.test_shell_behind_env import _wrapped

pytestmark = pytest.mark.timeout(60)

_RESETS = [["sudo", "-u", "app"], ["doas", "-u", "app"], ["setpriv", "--reset-env"]]


@pytest.mark.parametrize("wrappers", _RESETS, ids=["sudo", "doas", "setpriv"])
@pytest.mark.parametrize("declared", [True, False], ids=["pods-home", "no-pod-home"])
def test_a_rank_that_reads_the_target_users_home_is_still_counted(wrappers, declared):
    manifests = _wrapped(wrappers, "pserver")
    container = manifests[-1]["spec"]["containers"][0]
    line = container["command"][-1].replace("--sync $S", "--sync pserver")
    container["command"][-1] = f"{line} --keys $HOME/keys"
    if declared:
        container["env"].append({"name": "HOME", "value": "/root"})
    assert manifest_problems(manifests) == [_CLAIMED]


@pytest.mark.parametrize("wrappers", _RESETS, ids=["sudo", "doas", "setpriv"])
def test_the_words_a_wrapper_sets_itself(wrappers):
    """Set for sure (``${HOME:+h}`` reads ``h``), to a value no one but the image knows."""
    argv = [*wrappers, "sh", "-c", "exec run $HOME ${USER:-u} ${HOME:+h} $LOGNAME/x"]
    filled = shell_command(argv, set(), {"HOME": "/root"}, {"HOME"})
    assert filled is not None and filled[: len(wrappers) + 1] == [*wrappers, "run"]
    home, user, plus, logname = filled[len(wrappers) + 1 :]
    assert _is_filled(home) and _is_filled(user) and _is_filled(logname)
    assert plus == "h" and logname.endswith("/x")


def test_a_value_env_gives_after_sudo_is_still_filled_in():
    argv = ["sudo", "-u", "app", "env", "HOME=/srv", "sh", "-c", "exec run $HOME"]
    filled = shell_command(argv, set(), {"HOME": "/root"}, {"HOME"})
    assert filled == ["sudo", "-u", "app", "env", "HOME=/srv", "run", "/srv"]


def test_a_sidecar_that_writes_to_the_target_users_home_passes():
    """``sudo -u app sh -c 'exec rclone sync /ckpt $HOME/out'``: a program written out."""
    manifests = _wrapped(["sudo", "-u", "app"], "local")
    container = manifests[-1]["spec"]["containers"][0]
    container["command"][-1] = "exec rclone sync /ckpt $HOME/out"
    container.pop("ports", None)
    container.pop("readinessProbe", None)
    container.pop("livenessProbe", None)
    problems = manifest_problems(manifests)
    assert not any("rclone" in p or "HOME" in p for p in problems), problems
