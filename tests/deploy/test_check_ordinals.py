"""``distconv check-manifests`` on a StatefulSet's ordinals: a ``spec.ordinals.start`` that is
negative or past 0 (workers and shards, and the workers that dial a shard pod by another name),
and a StatefulSet of more than 1000 pods, judged on a sample (the first pod whose rank refuses,
the misplaced pods shown five in a row then counted, the
pods whose host names lose a digit; a hundred million ranks judged in bounded time); an
ordinals ``start`` the API server refuses, and ``ordinals`` that is no mapping."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.counts import count_problems
from tests.deploy.test_counts import PSERVER, _problems_with
from tests.deploy.test_rank_checks_stateful_ranks import _sts

pytestmark = pytest.mark.timeout(30)


_ON = {"DISTCONV_RANK_FROM_HOSTNAME": "1"}


def _grown_problems(replicas: int, env: dict[str, str], name: str, first: int = 0) -> list[str]:
    """The problems of StatefulSet ``name`` of ``replicas`` pods, its ordinals from ``first``,
    given ``env`` (rendered for 3, then grown: the shards serve at most 65536)."""
    objs = _sts(3, env)
    objs[-1]["metadata"]["name"] = name
    objs[-1]["spec"]["replicas"] = replicas
    if first:
        objs[-1]["spec"]["ordinals"] = {"start": first}
    return manifest_problems(objs)


def _lines(replicas: int, env: dict[str, str], name: str, first: int = 0) -> list[str]:
    """:func:`_grown_problems`' lines on the ranks."""
    return [p for p in _grown_problems(replicas, env, name, first) if "rank" in p and "would" in p]


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


@pytest.mark.parametrize("start", [1, 3])
def test_shards_whose_ordinals_start_past_0_are_named(start):
    """The shards' StatefulSet numbers its pods from ``spec.ordinals.start``; each serves its
    pod's ordinal (the pod-index label) and the workers dial ``<name>-0`` on. From 1, no pod
    serves shard 0 and one serves a shard past the count: the job never starts. The check
    judged the shards' names as if they were numbered from 0 and said nothing."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=2, image="d:1"))
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    shards["spec"]["ordinals"] = {"start": start}
    assert manifest_problems(objs) == [
        f"StatefulSet j-pserver: spec.ordinals.start {start} numbers the shards' pods from "
        f"j-pserver-{start}, but a shard serves its pod's ordinal and the shards are 0 to "
        "replicas - 1, dialled as j-pserver-0 on (set spec.ordinals.start 0)"
    ]


def _one_shard_at(start: int, dialled: int) -> list[dict]:
    """A job of one shard whose ``--shard 0`` is written out, its StatefulSet numbering its pod
    from ``start``, the workers dialling that StatefulSet's pod ``dialled``."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    shards["spec"]["ordinals"] = {"start": start}
    args = shards["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("$(DISTCONV_SHARD)")] = "0"
    (job,) = [o for o in objs if o["kind"] == "Job"]
    worker = job["spec"]["template"]["spec"]["containers"][0]
    address = f"j-pserver-{dialled}.j-pserver:5555"
    worker["args"][worker["args"].index("--pservers") + 1] = address
    for var in worker["env"]:
        if var["name"] == "DISTCONV_PSERVERS":
            var["value"] = address
    return objs


@pytest.mark.parametrize("start", [1, 3])
def test_a_shard_that_does_not_take_its_index_from_its_pod_may_start_past_0(start):
    """One shard with ``--shard 0`` written out serves shard 0 whatever its pod's ordinal, and
    the workers that dial its pod, ``j-pserver-<start>``, reach it: a valid job. It was refused
    as 'spec.ordinals.start 1 numbers the shards' pods from j-pserver-1, but a shard serves its
    pod's ordinal', which it does not; the workers' list was compared with no name."""
    assert manifest_problems(_one_shard_at(start, start)) == []


def test_workers_that_dial_a_shard_pod_past_0_by_another_name_are_named():
    """The same shard's pod is ``j-pserver-1``; workers that dial ``j-pserver-0`` dial a pod
    that does not exist. The shards' names were numbered from 0 whatever the start."""
    assert manifest_problems(_one_shard_at(1, 0)) == [
        "Job j-worker: --pservers 'j-pserver-0.j-pserver:5555' is not the "
        "shards' DNS names 'j-pserver-1.j-pserver:5555'",
        "Job j-worker: DISTCONV_PSERVERS 'j-pserver-0.j-pserver:5555' is not "
        "the shards' DNS names 'j-pserver-1.j-pserver:5555'",
    ]


def test_the_pods_placement_is_shown_for_five_then_counted():
    """Each pod's placement went into the line: 1000 pods that each train alone as rank 0 of
    1 made a line of 1000 entries (of megabytes for a StatefulSet of millions). Five are
    shown, then how many more, as the shards' names are."""
    objs = _sts(1000, {})
    (problem,) = [p for p in manifest_problems(objs) if "ranks would take" in p]
    shown = "; ".join(f"j-worker-{n}: rank 0 of 1" for n in range(5))
    assert f"the ranks would take ({shown} and 995 more), not each pod its own of 1000" in problem


def _ranks_line(replicas: int, env: dict[str, str], name: str = "j-worker") -> list[str]:
    """:func:`_grown_problems`' lines on the placement of the ranks."""
    return [p for p in _grown_problems(replicas, env, name) if "ranks would take" in p]


@pytest.mark.timeout(10)
def test_a_stateful_set_of_a_hundred_million_ranks_is_judged_in_bounded_time():
    """``replicas: 100000000`` (an int32 the API server takes) listed each pod's host name and
    judged each pod: minutes, then a MemoryError. A sample of the pods is judged: the set
    that places its ranks right passes, one whose pods each train alone is named, five shown."""
    assert _ranks_line(10**8, {**_ON, "DISTCONV_WORLD_SIZE": "100000000"}) == []
    (alone,) = _ranks_line(10**8, {})
    shown = "; ".join(f"j-worker-{n}: rank 0 of 1" for n in range(5))
    assert f"({shown} and 99999995 more), not each pod its own of 100000000" in alone


@pytest.mark.parametrize("replicas", [1200, 10**6])
def test_a_sample_finds_the_pods_whose_host_names_lose_a_digit(replicas):
    """Host names are cut to 63 characters: the pods of a 59-character StatefulSet name from
    ordinal 1000 on are ``<name>-100`` and so on, ranks taken twice. Of more pods than are
    each judged, the sample holds the first pods whose ordinals have four digits."""
    name = "w" * 59
    (problem,) = _ranks_line(replicas, {**_ON, "DISTCONV_WORLD_SIZE": str(replicas)}, name)
    assert f"the ranks would take ({name}-100: rank 100 of {replicas}; {name}-100: " in problem


@pytest.mark.parametrize(
    ("start", "problem"),
    [
        (2**31, "must be at most 2147483647 (an int32), got 2147483648"),
        (-1, "must be an integer >= 0, got -1"),
        ("2", "must be an integer >= 0, got '2'"),
    ],
)
def test_an_ordinals_start_the_api_server_refuses_is_named(start, problem):
    """``spec.ordinals.start`` is an int32 >= 0: past int32, ``known_count`` gives None and the
    check of the pods' host names judged nothing, with no line saying why."""
    problems = _problems_with(PSERVER, "StatefulSet", ("ordinals",), {"start": start})
    assert problems == [f"StatefulSet ps-pserver spec.ordinals: start {problem}"]


def test_ordinals_of_no_mapping_is_named_once_not_indexed():
    """``ordinals: restart`` holds no ``start`` ("start" is in the string, which is never
    indexed as a mapping): one line, the shape's. manifest_problems drops the field of the
    wrong type before count_problems reads it, so only count_problems called on the object as
    written (a public function) shows the guard: without it, ``"restart"["start"]`` raised
    TypeError."""
    problems = _problems_with(PSERVER, "StatefulSet", ("ordinals",), "restart")
    assert problems == ["StatefulSet ps-pserver: spec.ordinals must be a mapping, got 'restart'"]
    shards = {"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"ordinals": "restart"}}
    assert list(count_problems([shards])) == []
