"""Only an empty ``concurrencyPolicy`` is defaulted to ``Allow`` by the API server; ``0`` or a
boolean (YAML's ``no``, ``off``) is no string, and the API server refuses the CronJob. c1d2b8b
read every false-like value as ``Allow``: a backup CronJob with ``concurrencyPolicy: no``
passed, and a CronJob of ranks was told the wrong reason."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_manifest_cronjob import _with_cronjob

pytestmark = pytest.mark.timeout(60)


def _refused(policy: object) -> str:
    return (
        f"CronJob j-worker: concurrencyPolicy {policy!r} is none the API server takes "
        "(Allow, Forbid, Replace)"
    )


@pytest.mark.parametrize("policy", [0, False, [], True], ids=["zero", "no", "list", "yes"])
def test_a_policy_that_is_no_string_is_named(policy):
    objs, _ = _with_cronjob()
    objs[2]["spec"]["concurrencyPolicy"] = policy
    assert manifest_problems(objs) == [_refused(policy)]


def test_a_backup_cronjobs_policy_that_is_no_string_is_named():
    objs, _ = _with_cronjob()
    container = objs[2]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    container["command"], container["args"] = ["rclone", "sync", "/ckpt", "s3:b"], []
    objs[2]["spec"]["concurrencyPolicy"] = False
    assert _refused(False) in manifest_problems(objs)
