"""A variable a shell string sets first (``DISTCONV_PSERVERS=<shards>; exec distconv train``)
is the command's environment only where the shell exports it: the pod's env has it, or
``export`` says so. adf76a8 kept every such assignment as the command's, so a rank whose shell
only set ``DISTCONV_PSERVERS`` for itself, which trains locally, was counted as the shards' and
had its list compared with theirs; and ``export S=pserver;`` left the string unread, so a
second Job of the shards' ranks passed."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import fill_in_variables
from tests.deploy.test_programs_shell_sync import _CLAIMED, _SERVERS, _shell_pod
from tests.deploy.test_programs_transport import _beside

pytestmark = pytest.mark.timeout(60)


def _set_first(first: str, env: list[dict]) -> list[dict]:
    """The shards, the worker Job and a bare Pod whose rank names no transport, started by
    ``sh -c "<first>exec distconv train ..."`` with ``env`` (no ``DISTCONV_PSERVERS``)."""
    shards, job, pod = _beside(1, [], env)
    container = pod["spec"]["containers"][0]
    container["command"] = ["sh", "-c", f"{first}exec {' '.join(container.pop('args'))}"]
    return [*shards, job, pod]


def test_a_variable_the_shell_sets_only_for_itself_is_not_the_ranks():
    """Not exported, the rank sees no shards: it trains locally, beside the job."""
    assert manifest_problems(_set_first(f"DISTCONV_PSERVERS={_SERVERS['value']}; ", [])) == []


@pytest.mark.parametrize(
    ("first", "env"),
    [
        (f"export DISTCONV_PSERVERS={_SERVERS['value']}; ", []),
        (f"DISTCONV_PSERVERS={_SERVERS['value']} && ", [{**_SERVERS, "value": "x:1"}]),
    ],
    ids=["exported", "the-pods-variable"],
)
def test_a_variable_the_shell_exports_is_the_ranks(first, env):
    assert manifest_problems(_set_first(first, env)) == [_CLAIMED]


def test_an_exported_sync_is_filled_in():
    assert manifest_problems(_shell_pod("$S", [], "export S=pserver; ")) == [_CLAIMED]


@pytest.mark.parametrize(
    ("environment", "filled"),
    [(None, "S=a T=b run a b"), ({"S"}, "S=a T=b run a b"), (set(), "T=b run a b")],
    ids=["any-name", "the-pods", "none"],
)
def test_only_an_exported_variable_is_the_commands(environment, filled):
    assert fill_in_variables("S=a; export T=b; run $S $T", {}, environment) == filled
