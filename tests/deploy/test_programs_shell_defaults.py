"""``${NAME:-WORD}`` and ``${NAME:+WORD}`` of a variable the string or the pod sets to a plain
word were left as written, so a rank started as ``exec distconv train --sync ${S:-local}``
with ``S=pserver`` in its env was never read: a second Job of the shards' ranks passed.
They are filled in as the shell fills them in; a name only the cluster knows stays one
(the kubelet's ``$(S)``), and one not set where the checks can see leaves the string unread."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import fill_in_variables
from tests.deploy.test_programs_shell_sync import _CLAIMED, _shell_pod

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("sync", "env", "first"),
    [
        ("${S:-local}", [{"name": "S", "value": "pserver"}], ""),
        ('"${S-local}"', [], "S=pserver; "),
        ("${S:-pserver}", [], "S=; "),
        ("${P:+pserver}", [{"name": "P", "value": "1"}], ""),
    ],
    ids=["env", "set-first-quoted", "empty", "alternative"],
)
def test_a_rank_whose_sync_default_reads_the_shards_is_claimed(sync, env, first):
    assert manifest_problems(_shell_pod(sync, env, first)) == [_CLAIMED]


@pytest.mark.parametrize(
    ("script", "known", "filled"),
    [
        ("run ${S:-b} ${S-b} ${S:+b} ${S+b}", {"S": "a"}, "run a a b b"),
        ("S=; run ${S:-b} x${S-b} x${S:+b} ${S+b}", {}, "S= run b x x b"),
        ("run ${T:-b} ${S:=b} '${S:-b}'", {"S": "a"}, "run ${T:-b} ${S:=b} '${S:-b}'"),
    ],
    ids=["set", "empty", "unknown-assigning-quoted"],
)
def test_a_default_is_filled_in_as_the_shell_fills_it(script, known, filled):
    assert fill_in_variables(script, known) == filled


def test_a_default_of_a_variable_only_the_cluster_knows_is_named_as_such():
    env = [{"name": "S", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "s"}}}]
    note = (
        " (Pod j-w0: --sync, or DISTCONV_PSERVERS, is known only to the cluster, and is taken "
        "for the shards' transport)"
    )
    assert manifest_problems(_shell_pod("${S:-local}", env)) == [_CLAIMED + note]
