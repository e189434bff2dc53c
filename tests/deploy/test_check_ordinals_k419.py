"""``distconv check-manifests``: review k419's finding on a StatefulSet's ``spec.ordinals``,
shown by a test that failed before its fix."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_rank_checks_stateful_ranks import _sts

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("start", [-5, -1])
def test_a_negative_ordinals_start_is_named_once_not_judged_as_pods(start):
    """``spec.ordinals.start: -5`` is refused by the API server, and named so ('start must be
    an integer >= 0'); the check also judged the pods it would name, adding 'pod j-worker--5's
    rank would refuse to start' for a set that is never made. It is named once."""
    env = {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "3"}
    lines = [
        p for p in manifest_problems(_sts(3, env, start=start)) if "ordinal" in p or "would" in p
    ]
    assert lines == [
        f"StatefulSet j-worker spec.ordinals: start must be an integer >= 0, got {start}"
    ]
