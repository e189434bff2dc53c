"""A CronJob's ``concurrencyPolicy`` that the API server does not take (``forbid``,
``Forbidden``, a number) was named by a89693a as one that "lets a run start while the last one
still runs", the wrong reason, and an empty one (defaulted to ``Allow``) was printed as an empty
policy. A value none of Allow, Forbid and Replace is now named as such, for any
CronJob; an empty one is read as ``Allow``."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_check_cronjob_overlap import _OVERLAP
from tests.deploy.test_manifest_cronjob import _with_cronjob

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("policy", ["forbid", "Forbidden", 5])
def test_a_policy_the_api_server_does_not_take_is_named(policy):
    objs, _ = _with_cronjob()
    objs[2]["spec"]["concurrencyPolicy"] = policy
    assert manifest_problems(objs) == [
        f"CronJob j-worker: concurrencyPolicy {policy!r} is none the API server takes "
        "(Allow, Forbid, Replace)"
    ]


def test_an_empty_policy_is_the_default():
    objs, _ = _with_cronjob()
    objs[2]["spec"]["concurrencyPolicy"] = ""
    assert manifest_problems(objs) == [_OVERLAP.format("Allow")]
