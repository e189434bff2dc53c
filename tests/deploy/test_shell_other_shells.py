"""zsh, ksh and mksh were known as shells where a command is read past them (``commands.SHELLS``)
but ``shell_command`` read the ``-c`` string of sh, bash, dash and ash only: a rank started as
``zsh -c "exec distconv train ..."`` was held to a rank's probes and grace period, but its flags
were never judged, nor was it counted with the shards' ranks.
The two lists are now one."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import shell_command
from tests.deploy.test_programs_shell_sync import _CLAIMED, _shell_pod

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("shell", ["zsh", "/bin/ksh", "mksh"])
def test_a_rank_in_another_shells_string_is_read(shell):
    objs = _shell_pod("pserver", [])
    container = objs[-1]["spec"]["containers"][0]
    container["command"][0] = shell
    assert manifest_problems(objs) == [_CLAIMED]


def test_another_shells_string_splits_as_sh_does():
    argv = ["zsh", "-e", "-c", "exec distconv train --out '/var/x y'"]
    assert shell_command(argv, set()) == ["distconv", "train", "--out", "/var/x y"]
