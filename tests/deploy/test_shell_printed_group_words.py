"""A reserved word opens or closes a group only where a command starts; elsewhere it is an
argument (``sh -c 'echo done; (echo echo hi) | sh'`` prints ``done`` and ``hi``). a0f2362 read
any ``case`` as opening one, whose head then hid every group after it, and 509084b any
``done``, ``fi`` or ``}`` as closing one: after ``echo in case of`` or ``echo done`` (quoted
too: the quotes are gone from the word), a rank's line a group then piped into a shell
(``(echo <rank line>) | sh``) was read as printed into nothing, and the Job let through with a
30 s grace period."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f"echo in case of; (echo {_RANK}) | sh",
        f"echo 'done'; (echo {_RANK}) | sh",
        f"echo fi; {{ echo {_RANK}; }} | sh",
        f"printf '%s\\n' esac; (echo {_RANK}) | sh",
        f"for w in if done; do echo $w; done; (echo {_RANK}) | sh",
    ],
    ids=["case", "done", "fi", "esac", "loop-words"],
)
def test_a_reserved_word_as_an_argument_hides_no_group_piped_into_a_shell(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "script",
    [
        f"case x in esac; (echo {_RANK}) > /log; true | sh",
        f"if true; then echo {_RANK}; fi > /log; echo done | sh",
    ],
    ids=["empty-case", "if-into-a-file"],
)
def test_a_group_a_reserved_word_closes_still_ends_there(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []
