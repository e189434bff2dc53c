"""Ranks run as a StatefulSet's pods have no Job index: each places itself by its host name's
ordinal (``t-2``) only with ``DISTCONV_RANK_FROM_HOSTNAME`` on, in a world of
``DISTCONV_WORLD_SIZE``, which must be the replicas; otherwise each pod is rank 0 of 1, which
refuses a ``DISTCONV_WORLD_SIZE`` above 1 and, without one, trains alone. The check judged the
placement of Jobs' ranks only and passed every such StatefulSet. Each verdict is
held to :func:`distconv.runtime.detect_runtime` run on each pod's environment and host name."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.placement import RuntimeConfigError
from distconv.runtime import detect_runtime, runtime_flags
from distconv.train_args import train_parser
from tests.deploy.index_pods import _kubelet
from tests.deploy.job_shapes import kubernetes_doc_text

pytestmark = pytest.mark.timeout(60)


def _sts(
    replicas: int, env: dict[str, str], flags: tuple[str, ...] = (), start: int | None = None
) -> list[dict]:
    """The rendered shards and Service, and the workers' pods as StatefulSet ``j-worker`` of
    ``replicas`` (its ordinals from ``start`` where given), ``env`` (in its order) where the
    rendered ``DISTCONV_WORLD_SIZE`` was (a name left out is unset), ``flags`` given to the
    ranks."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=replicas, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    template = job["spec"]["template"]
    template["spec"]["restartPolicy"] = "Always"
    template["metadata"]["labels"] = labels = dict(shards["spec"]["selector"]["matchLabels"])
    labels["app.kubernetes.io/component"] = "worker"
    (container,) = template["spec"]["containers"]
    names = {"DISTCONV_WORLD_SIZE", "DISTCONV_RANK_FROM_HOSTNAME"}
    kept = [v for v in container["env"] if v["name"] not in names]
    container["env"] = [*kept, *({"name": k, "value": v} for k, v in env.items())]
    container["args"] = [*container["args"], *flags]
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {**job["metadata"]},
        "spec": {
            "serviceName": shards["spec"]["serviceName"],
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": template,
        },
    }
    if start is not None:
        sts["spec"]["ordinals"] = {"start": start}
    return [o for o in objs if o is not job] + [sts]


def _places(objs: list[dict]) -> bool:
    """Whether the StatefulSet's pods (j-worker-<ordinal>) each place themselves as their own
    rank of its replicas with local rank 0: its env and arguments filled in as the kubelet
    fills them in, parsed by ``distconv train``'s parser, placed by detect_runtime."""
    spec = objs[-1]["spec"]
    (container,) = spec["template"]["spec"]["containers"]
    values: dict[str, str] = {}
    for var in container["env"]:  # each filled in from those before it
        values[var["name"]] = _kubelet(str(var.get("value") or ""), values)
    argv = [_kubelet(word, values) for word in container["args"]]
    flags = runtime_flags(train_parser().parse_args(argv[argv.index("train") + 1 :]))
    first, replicas = spec.get("ordinals", {}).get("start", 0), spec["replicas"]
    placed = []
    for ordinal in range(first, first + replicas):
        try:
            runtime = detect_runtime(flags, values, hostname=f"j-worker-{ordinal}")
        except RuntimeConfigError:
            return False
        placed.append((runtime.rank, runtime.world_size, runtime.local_rank))
    return sorted(placed) == [(r, replicas, 0) for r in range(replicas)]


_FIX = (
    " (set DISTCONV_RANK_FROM_HOSTNAME=1 and DISTCONV_WORLD_SIZE to the replicas, with no "
    "launcher's pair, --rank nor --world-size, or run the ranks as an Indexed Job)"
)
_ON = {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "3"}
_ALONE = (
    "the ranks would take (j-worker-0: rank 0 of 1; j-worker-1: rank 0 of 1; j-worker-2: rank "
    "0 of 1), not each pod its own of 3, local rank 0"
)
_ALL_RANK_0 = (
    "the ranks would take (j-worker-0: rank 0 of 3; j-worker-1: rank 0 of 3; j-worker-2: rank "
    "0 of 3), not each pod its own of 3, local rank 0"
)


def _refused(ordinal: int, why: str) -> str:
    return f"pod j-worker-{ordinal}'s rank would refuse to start: {why}"


@pytest.mark.parametrize(
    ("replicas", "env", "flags", "start", "problem"),
    [
        (
            3,
            {"DISTCONV_WORLD_SIZE": "3"},
            (),
            None,
            _refused(
                0,
                "DISTCONV_WORLD_SIZE=3 says the job has 3 workers, but nothing says which one "
                "this is (no --rank, RANK, MPI rank or JOB_COMPLETION_INDEX, and "
                "DISTCONV_RANK_FROM_HOSTNAME is off): alone it would train as rank 0 of 1",
            ),
        ),
        (3, {}, (), None, _ALONE),
        (
            3,
            {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "4"},
            (),
            None,
            "the ranks would take (j-worker-0: rank 0 of 4; j-worker-1: rank 1 of 4; j-worker-2: "
            "rank 2 of 4), not each pod its own of 3, local rank 0",
        ),
        (
            3,
            {"DISTCONV_RANK_FROM_HOSTNAME": "1"},
            (),
            None,
            _refused(
                0,
                "the rank comes from host name 'j-worker-0', but DISTCONV_WORLD_SIZE is not set "
                "to say how many workers there are",
            ),
        ),
        # what d67ad88 left unjudged: a launcher's pair every pod shares
        (3, {"RANK": "0", "WORLD_SIZE": "3", "DISTCONV_WORLD_SIZE": "3"}, (), None, _ALL_RANK_0),
        (
            3,
            {**_ON, "RANK": "0", "WORLD_SIZE": "3"},
            (),
            None,
            _refused(
                1,
                "two sources disagree about this process's rank: RANK=0, WORLD_SIZE=3 "
                "(distconv) vs host name 'j-worker-1' (hostname); unset one or pass "
                "--rank/--world-size explicitly",
            ),
        ),
        # a --rank written into every pod wins over the host name's ordinal
        (3, _ON, ("--rank", "0"), None, _ALL_RANK_0),
        (3, {}, ("--rank", "0", "--world-size", "3"), None, _ALL_RANK_0),
        (
            3,
            {},
            ("--world-size", "3"),
            None,
            _refused(
                0,
                "--world-size 3 says the job has 3 workers, but nothing says which one this is "
                "(no --rank, RANK, MPI rank or JOB_COMPLETION_INDEX): each would train as rank "
                "0; give --rank too",
            ),
        ),
        # a reference nothing defines reaches the ranks as text; one defined later too
        (
            3,
            {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "$(RANKS)"},
            (),
            None,
            _refused(0, "DISTCONV_WORLD_SIZE must be an integer, got '$(RANKS)'"),
        ),
        (
            2,
            {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "$(N)", "N": "2"},
            (),
            None,
            _refused(0, "DISTCONV_WORLD_SIZE must be an integer, got '$(N)'"),
        ),
        # spec.ordinals.start: the last pod's ordinal is out of range
        (
            2,
            {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "2"},
            (),
            1,
            _refused(
                2,
                "rank 2 is out of range for world size 2 (need 0 <= rank < world size), from "
                "host name 'j-worker-2' (hostname)",
            ),
        ),
        # a local rank of 1: out of the pod's world of one rank
        (
            1,
            {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "1"},
            (),
            None,
            _refused(
                0,
                "local rank 1 is out of range for world size 1, from RANK=0, WORLD_SIZE=1 "
                "(distconv)",
            ),
        ),
    ],
)
def test_ranks_a_statefulset_does_not_place_are_named(replicas, env, flags, start, problem):
    objs = _sts(replicas, env, flags, start)
    assert not _places(objs)
    problems = [p for p in manifest_problems(objs) if p.startswith("StatefulSet j-worker: ")]
    fix = _FIX if start is None else f"{_FIX[:-1]}; spec.ordinals.start 0, not {start})"
    assert f"StatefulSet j-worker: {problem}{fix}" in problems


@pytest.mark.parametrize(
    ("replicas", "env", "flags"),
    [
        (3, {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "3"}, ()),
        (2, {"DISTCONV_RANK_FROM_HOSTNAME": "on", "DISTCONV_WORLD_SIZE": "02"}, ()),
        (1, {}, ()),
        (1, {"RANK": "0", "WORLD_SIZE": "1"}, ()),
        (3, {"N": "3", "DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "$(N)"}, ()),
        (
            3,
            {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "3"},
            ("--world-size", "3"),
        ),
        (
            2,
            {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "2", "LOCAL_RANK": "1"},
            (),
        ),
    ],
)
def test_ranks_a_statefulset_places_pass(replicas, env, flags):
    """(The StatefulSet names the shards' Service, whose selector is not its pods': named
    alone, as the StatefulSet is no rendered shape. LOCAL_RANK without RANK is not read.)"""
    objs = _sts(replicas, env, flags)
    assert _places(objs)
    problems = manifest_problems(objs)
    assert not [p for p in problems if "DISTCONV_" in p or "rank" in p], problems


def test_values_the_cluster_fills_in_are_not_judged():
    """A DISTCONV_WORLD_SIZE an envFrom's ConfigMap may define: only the cluster knows it."""
    objs = _sts(3, {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "$(RANKS)"})
    (container,) = objs[-1]["spec"]["template"]["spec"]["containers"]
    container["envFrom"] = [{"configMapRef": {"name": "ranks"}}]
    assert not [p for p in manifest_problems(objs) if "would" in p]


def test_a_statefulset_of_shards_is_not_taken_for_ranks():
    objs = copy.deepcopy(render_manifests(job_name="j", workers=3, servers=2, image="d:1"))
    assert manifest_problems(objs) == []


def test_the_docs_say_so():
    text = kubernetes_doc_text()
    assert "Ranks run as a StatefulSet's pods place themselves by their host name's" in text
    assert "the check works out each pod's placement as the rank does at start" in text


def test_a_statefulset_without_metadata_is_named_not_a_crash():
    rank = {"name": "c", "args": ["/opt/venv/bin/distconv", "train"]}
    spec = {"replicas": 2, "template": {"spec": {"containers": [rank]}}}
    problems = manifest_problems([{"kind": "StatefulSet", "spec": spec}])
    named = [p for p in problems if p.startswith("StatefulSet ?: ") and "rank 0 of 1" in p]
    assert named, problems
