"""A Job whose program only the cluster knows (``valueFrom``, ``envFrom``) may run the ranks,
and is held to their 60 s grace period (d7b130a); but only where that program was
the whole command line or came after a shell's separator. The first command of a shell's
string of several (``sh -c "$PROG; echo done"``), or one started through ``env`` or an init
process (``tini -- $(PROG)``), was read as another program, and its 30 s grace passed.
"""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_check_other_programs import _job_running

pytestmark = pytest.mark.timeout(60)

_FROM_CLUSTER = [{"name": "PROG", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "p"}}}]
_GRACE = "Job j-solo: terminationGracePeriodSeconds 30 < 60 s"
#: a rank's command line, for a shell's string to run or print
_RANK = "distconv train --sync pserver --resume auto --out /o"


def _beside_the_job(command: list[str], env: list[dict], env_from: list[dict]) -> list[dict]:
    """The rendered job and a Job ``j-solo`` of one container running ``command``, with
    ``env`` and ``envFrom`` ``env_from``, the default grace period and no probes."""
    objs, template = _job_running(command)
    container = template["spec"]["containers"][0]
    container["env"] = env
    if env_from:
        container["envFrom"] = env_from
    metadata = {**objs[0]["metadata"], "name": "j-solo"}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata}
    job["spec"] = {"template": template}
    return [*objs, job]


@pytest.mark.parametrize(
    ("command", "env", "env_from"),
    [
        (["sh", "-c", "$PROG; echo done"], _FROM_CLUSTER, []),
        (["bash", "-lc", "$TRAIN && echo done"], [], [{"configMapRef": {"name": "c"}}]),
        (["sh", "-e", "-c", "${PROG} train\necho done"], _FROM_CLUSTER, []),
        (["tini", "-g", "--", "$(PROG)"], _FROM_CLUSTER, []),
        (["env", "A=1", "$(PROG)", "train"], _FROM_CLUSTER, []),
    ],
    ids=["shell-first", "bash-login-envfrom", "shell-options", "tini", "env"],
)
def test_a_program_only_the_cluster_knows_first_in_a_shell_or_after_a_wrapper_is_held(
    command, env, env_from
):
    assert _GRACE in manifest_problems(_beside_the_job(command, env, env_from))


@pytest.mark.parametrize(
    "command",
    [
        ["sh", "-c", 'exec "$@"', "sh", "rclone", "sync", "/ckpt", "s3:b"],
        ["sh", "-c", '$1 sync /ckpt "$2"', "sh", "rclone", "s3:b"],
        ["tini", "--", "rclone", "sync", "/ckpt", "s3:b"],
    ],
    ids=["shell-arguments", "shell-positional", "tini-another-program"],
)
def test_a_shell_running_the_words_after_its_string_runs_them(command):
    """The words after a shell's string are written in the manifest: ``"$@"`` and ``$1``
    are no program only the cluster knows."""
    assert manifest_problems(_beside_the_job(command, [], [])) == []
