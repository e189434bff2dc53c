"""A rank started by a shell string that names its transport through a shell variable
(``--sync $S``, ``--sync "${SYNC}"``) was not read as a rank at all: the string held ``$``,
which only the running shell fills in, so a baseline beside the job (``S=local``) and a second
Job of the shards' ranks (``S=pserver``) looked alike, as another program. A variable of a
plain value, from the container's ``env`` or set first in the string (``S=ps; exec distconv
...``), is now filled in; one only the cluster knows is named as such in the line that counts
the rank as the shards'."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import fill_in_variables
from tests.deploy.test_programs_transport import _beside

pytestmark = pytest.mark.timeout(60)

_SERVERS = {"name": "DISTCONV_PSERVERS", "value": "j-pserver-0.j-pserver:5555"}
_CLAIMED = (
    "Job j-worker, Pod j-w0: 2 Jobs and Pods run distconv train beside the shards (StatefulSet "
    "j-pserver), whose ranks are one world: each rank would be claimed by each of them"
)


def _shell_pod(script_sync: str, env: list[dict], first: str = "") -> list[dict]:
    """The shards, the worker Job and a bare Pod running its rank through ``sh -c`` with
    ``--sync`` written as ``script_sync``, ``first`` before ``exec``, and ``env`` besides
    ``DISTCONV_PSERVERS`` (which alone would make it the shards' rank)."""
    shards, job, pod = _beside(1, [], [_SERVERS, *env])
    container = pod["spec"]["containers"][0]
    line = " ".join([*container.pop("args"), "--sync", script_sync])
    container["command"] = ["sh", "-c", f"{first}exec {line}"]
    return [*shards, job, pod]


@pytest.mark.parametrize(
    ("sync", "env", "first"),
    [
        ("$S", [{"name": "S", "value": "local"}], ""),
        ('"${SYNC}"', [{"name": "SYNC", "value": "local"}], ""),
        ("$S", [], "S=local; "),
        ("$S", [{"name": "S", "value": "pserver"}], "S=local && "),
    ],
    ids=["env", "env-braced-quoted", "set-first", "set-first-over-env"],
)
def test_a_local_baseline_whose_sync_is_a_shell_variable_is_no_rank_of_theirs(sync, env, first):
    assert manifest_problems(_shell_pod(sync, env, first)) == []


@pytest.mark.parametrize(
    ("sync", "env", "first"),
    [
        ("$S", [{"name": "S", "value": "pserver"}], ""),
        ("${S}", [], "S=pserver\n"),
    ],
    ids=["env", "set-first"],
)
def test_a_rank_whose_sync_is_the_shards_is_claimed(sync, env, first):
    assert manifest_problems(_shell_pod(sync, env, first)) == [_CLAIMED]


def test_a_variable_the_string_sets_first_is_the_ranks_too():
    """``DISTCONV_PSERVERS=; exec distconv train ...`` empties the pod's variable (one of the
    environment, so the rank's too): it names no shards, and the rank trains locally."""
    shards, job, pod = _beside(1, [], [_SERVERS])
    container = pod["spec"]["containers"][0]
    line = " ".join(container.pop("args"))
    container["command"] = ["sh", "-c", f"DISTCONV_PSERVERS=; exec {line}"]
    assert manifest_problems([*shards, job, pod]) == []


def test_a_sync_only_the_cluster_knows_is_named_as_such():
    env = [{"name": "S", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "s"}}}]
    note = (
        " (Pod j-w0: --sync, or DISTCONV_PSERVERS, is known only to the cluster, and is taken "
        "for the shards' transport)"
    )
    assert manifest_problems(_shell_pod("$S", env)) == [_CLAIMED + note]


@pytest.mark.parametrize(
    ("script", "known", "filled"),
    [
        ("S=a; run $S ${S}", {}, "S=a run a a"),
        ("run '$S' \"$S\" \\$S", {"S": "a"}, "run '$S' \"a\" \\$S"),
        ("cd /x; S=b; run $S", {"S": "a"}, "cd /x; S=b; run $S"),
        ("run $T", {"S": "a"}, "run $T"),
    ],
    ids=["set-first", "quotes", "set-later", "unknown"],
)
def test_only_a_plain_value_the_shell_is_sure_to_read_is_filled_in(script, known, filled):
    assert fill_in_variables(script, known) == filled
