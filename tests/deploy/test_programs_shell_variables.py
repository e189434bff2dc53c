"""A shell string that sets a variable itself and runs it (``CMD=rclone; $CMD sync ...``) runs
the value it sets; d7b130a read ``$CMD`` from the container (where the unread string itself
looked like a value ``env_as_seen`` could not read) as a program only the cluster knows, so a
checkpoint backup Job so written was held to the rank's 60 s grace period and refused for its
default 30 s."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)

_TRAIN = "distconv train --sync pserver --resume auto --out /var/lib/distconv/run/train"


@pytest.mark.parametrize(
    ("script", "env_from"),
    [
        ("CMD=rclone; $CMD sync /ckpt s3:b", []),
        ("CMD=/usr/bin/rclone && ${CMD} sync /ckpt s3:b", [{"configMapRef": {"name": "c"}}]),
    ],
    ids=["set-in-string", "set-in-string-envfrom"],
)
def test_a_program_the_shell_string_sets_itself_is_read_as_set(script, env_from):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], env_from)) == []


def test_a_rank_the_shell_string_sets_from_the_env_is_still_held():
    env = [{"name": "TRAIN", "value": _TRAIN}]
    problems = manifest_problems(_beside_the_job(["sh", "-c", "P=$TRAIN; $P"], env, []))
    assert _GRACE in problems


@pytest.mark.parametrize(
    "script",
    [
        'P="$TRAIN"; $P',
        "P=$(TRAIN); exec $P",
        "P=rclone; P=$TRAIN; $P",
        "TRAIN=/bin/true $TRAIN",
    ],
    ids=["quoted-value", "kubelet-reference", "set-again", "set-for-the-command-only"],
)
def test_a_rank_the_string_sets_to_a_value_not_as_written_is_still_held(script):
    """15a3238 read ``P="$TRAIN"`` as P set to the empty string (the quote ended the value) and
    ``TRAIN=/bin/true $TRAIN`` as TRAIN set for its own expansion, so these Jobs, which run a
    rank, kept their default 30 s grace period with no line."""
    env = [{"name": "TRAIN", "value": _TRAIN}]
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], env, []))
