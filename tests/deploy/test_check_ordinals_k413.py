"""``distconv check-manifests``: review k413's findings on the StatefulSet whose pods are
judged on a sample (more than 1000 of them), each shown by a test that failed before its fix."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_rank_checks_stateful_ranks import _sts

pytestmark = pytest.mark.timeout(30)

_ON = {"DISTCONV_RANK_FROM_HOSTNAME": "1"}


def _lines(replicas: int, env: dict[str, str], name: str, first: int = 0) -> list[str]:
    """The lines on the ranks of StatefulSet ``name`` of ``replicas`` pods, its ordinals from
    ``first``, given ``env`` (rendered for 3, then grown: the shards serve at most 65536)."""
    objs = _sts(3, env)
    objs[-1]["metadata"]["name"] = name
    objs[-1]["spec"]["replicas"] = replicas
    if first:
        objs[-1]["spec"]["ordinals"] = {"start": first}
    return [p for p in manifest_problems(objs) if "rank" in p and "would" in p]


@pytest.mark.parametrize(
    ("replicas", "world", "name", "refusing"),
    [
        (1200, 1100, "j-worker", "j-worker-1100"),  # sampled: 0-5, 9-11, 99-101, 999-1001, 1199
        (10**6, 500, "w" * 59, "w" * 59 + "-500"),  # 999 and 1000 sampled, 500 the first
        (10**6, 10**6 - 7, "j-worker", f"j-worker-{10**6 - 7}"),  # the last run's last refuses
    ],
)
def test_the_first_pod_whose_rank_refuses_is_named(replicas, world, name, refusing):
    """Of more than 1000 pods, the line named the first refusing pod of the sample (the last of
    its run of ordinals), not the first that refuses: a world of 1100 of 1200 pods named pod
    1199, where judging every pod names 1100."""
    (line,) = _lines(replicas, {**_ON, "DISTCONV_WORLD_SIZE": str(world)}, name)
    assert f"pod {refusing}'s rank would refuse to start: rank {refusing.rsplit('-')[-1]} " in line


@pytest.mark.parametrize(
    ("name", "cut", "first_wrong"),
    [("w" * 59, "-100", 1000), ("w" * 61, "-1", 10)],  # ordinals of 4 (of 2) digits lose one
)
def test_the_misplaced_pods_shown_are_five_in_a_row_then_counted(name, cut, first_wrong):
    """Of more than 1000 pods, the line showed the judged pods from the first misplaced one,
    skipping those not judged, and counted only the pods after the last shown: pods 1000, 1001
    and 1199 of 1200 with nothing counted, where judging every pod shows pods 1000 to 1004
    'and 195 more'. The five shown are the pods in a row, as for 1000 pods."""
    (line,) = _lines(1200, {**_ON, "DISTCONV_WORLD_SIZE": "1200"}, name)
    shown = "; ".join([f"{name}{cut}: rank {cut[1:]} of 1200"] * 5)
    assert f"the ranks would take ({shown} and {1200 - first_wrong - 5} more), not" in line
