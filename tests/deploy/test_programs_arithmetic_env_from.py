"""The kubelet reads a ``$(`` of a container's command to the first ``)`` as a reference to a
variable: ``$((N+1))``'s names ``(N+1``, which it leaves as written where no variable has that
name. An ``envFrom`` makes variables only of a ConfigMap's or a Secret's keys (``[-._a-zA-Z0-9]``,
after its ``prefix``), never such a name; but every reference was taken for a value only the
cluster knows where a container had an ``envFrom``, so a sidecar running ``sleep
$((INTERVAL*60))`` had ``(INTERVAL*60`` filled with a stand-in, its ``(`` read as a subshell
and the stand-in as its program, and was held to a rank's 60 s grace period and probes, the
defect 0ab9a4a fixed for ``$(($I + 1))``."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)

_CONFIG = {"configMapRef": {"name": "c"}}


@pytest.mark.parametrize(
    "script",
    [
        "while :; do sleep $((INTERVAL*60)); rclone sync /ckpt s3:b; done",
        "echo $((N+1)) > /tmp/index",
        "exec sleep $((N*60))",
    ],
    ids=["loop", "echo", "sleep"],
)
def test_an_arithmetic_expansion_under_an_env_from_runs_no_program(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [_CONFIG])) == []


@pytest.mark.parametrize(
    ("command", "env_from"),
    [
        (["$(PROG)"], [_CONFIG]),
        (["$(APP_PROG)"], [{**_CONFIG, "prefix": "APP_"}]),
        (["sh", "-c", "exec $(my-prog.v1)"], [_CONFIG]),
    ],
    ids=["key", "prefixed-key", "dotted-key"],
)
def test_a_variable_an_env_from_may_set_is_still_a_program_only_the_cluster_knows(
    command, env_from
):
    assert _GRACE in manifest_problems(_beside_the_job(command, [], env_from))
