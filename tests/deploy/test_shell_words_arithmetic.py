"""An arithmetic expansion (``$((I + 1))``) is part of a word, not two subshells: fafe491 split
shlex's ``((`` and ``))`` into ``(`` ``(`` and ``)`` ``)``, separators, so the words inside were
read as a command. A sidecar computing ``sleep $(($I + 1))`` of a ``valueFrom`` index was taken
for a program only the cluster knows and held to a rank's 60 s grace period."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.words import split_words
from tests.deploy.test_programs_first_command import _FROM_CLUSTER, _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)

_INDEX = [{**_FROM_CLUSTER[0], "name": "I"}]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("sleep $(($I+1));b", ["sleep", "$", "((", "$I+1", "))", ";", "b"]),
        ("a $(( I * 2 ))|sh", ["a", "$", "((", "I", "*", "2", "))", "|", "sh"]),
    ],
    ids=["packed", "spaced"],
)
def test_an_arithmetic_expansion_opens_and_closes_no_subshell(text, words):
    assert split_words(text, newlines=True) == words


@pytest.mark.parametrize(
    "script",
    [
        "sleep $(($I + 1))",
        "echo $(($I+1)) > /tmp/index; sleep 10",
        "sleep $(( $(date +%s) % 5 ))",
    ],
    ids=["sleep", "printed", "substitution-inside"],
)
def test_a_sidecar_that_computes_a_number_runs_no_rank(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], _INDEX, [])) == []


def test_a_program_after_an_arithmetic_expansion_is_still_read():
    script = "sleep $(($I + 1)); $PROG"
    env = [*_INDEX, *_FROM_CLUSTER]
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], env, []))
