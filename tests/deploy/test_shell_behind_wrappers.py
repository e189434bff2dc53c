"""A shell started through a wrapper (``tini -g -- sh -c "exec distconv train ..."``, the
images' own entrypoint written out; ``env A=1 bash -c ...``) runs its string as one started
directly does, but ``shell_command`` read the string only where the shell was the command
line's first word: such a rank was held to a rank's probes, yet its flags were never judged
and it was not counted with the shards' ranks (the wrappers 3178db9 and 0999c00 look
through were not looked through here)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import shell_command
from tests.deploy.test_programs_shell_sync import _CLAIMED, _shell_pod

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "wrappers",
    [["tini", "-g", "--"], ["/usr/bin/tini", "--", "gosu", "app"], ["timeout", "-s", "KILL", "9h"]],
    ids=["tini", "tini-gosu", "timeout"],
)
def test_a_rank_in_a_wrapped_shells_string_is_read(wrappers):
    objs = _shell_pod("pserver", [])
    container = objs[-1]["spec"]["containers"][0]
    container["command"] = [*wrappers, *container["command"]]
    assert manifest_problems(objs) == [_CLAIMED]


def test_the_wrappers_stay_before_the_command():
    """``env -u NAME`` before the shell still removes NAME for the rank the string starts."""
    argv = ["env", "-u", "X", "A=1", "sh", "-c", "exec distconv train"]
    assert shell_command(argv, set()) == ["env", "-u", "X", "A=1", "distconv", "train"]
