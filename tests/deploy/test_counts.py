"""A count field of a job's manifest (MPIJob slotsPerWorker and replicas, a StatefulSet's
replicas, a Job's completions and parallelism) that is no integer is named by
``manifest_problems``, not a traceback, nor read as the integer ``int()`` makes of it."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

MPI = dict(job_name="pairs", workers=6, servers=0, image="d:1", slots_per_worker=2)
PSERVER = dict(job_name="ps", workers=2, servers=2, image="d:1")


def _problems_with(kw: dict, kind: str, path: tuple[str, ...], value) -> list[str]:
    objs = render_manifests(**kw, train_args=["--epochs", "2"])
    (obj,) = [copy.deepcopy(o) for o in objs if o["kind"] == kind]
    node = obj["spec"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return manifest_problems([obj if o["kind"] == kind else o for o in objs])


@pytest.mark.parametrize("value", ["2", 1.5, True, "x", 0])
def test_a_slots_per_worker_of_no_count_is_named(value):
    problems = _problems_with(MPI, "MPIJob", ("slotsPerWorker",), value)
    assert f"MPIJob pairs: slotsPerWorker must be an integer >= 1, got {value!r}" in problems
    if value != 0:  # no capacity made up from it ("2" read as 2 passed: the job never starts)
        assert problems == [f"MPIJob pairs: slotsPerWorker must be an integer >= 1, got {value!r}"]


@pytest.mark.parametrize("value", ["3", "x", 1.5, True, -1])
def test_worker_replicas_of_no_count_are_named(value):
    problems = _problems_with(MPI, "MPIJob", ("mpiReplicaSpecs", "Worker", "replicas"), value)
    assert problems[0] == f"MPIJob pairs Worker: replicas must be an integer >= 0, got {value!r}"


@pytest.mark.parametrize(
    ("kind", "field"),
    [("StatefulSet", "replicas"), ("Job", "completions"), ("Job", "parallelism")],
)
@pytest.mark.parametrize("value", ["x", 2.5, True, 1e21])
def test_a_pserver_jobs_count_of_no_integer_is_named(kind, field, value):
    problems = _problems_with(PSERVER, kind, (field,), value)
    name = "ps-pserver" if kind == "StatefulSet" else "ps-worker"
    assert f"{kind} {name}: {field} must be an integer >= 0, got {value!r}" in problems


def test_the_rendered_counts_pass():
    assert manifest_problems(render_manifests(**MPI, train_args=["--epochs", "2"])) == []
    assert manifest_problems(render_manifests(**PSERVER, train_args=["--epochs", "2"])) == []


@pytest.mark.parametrize("value", ["90", 90.5, True])
def test_a_grace_period_of_no_integer_is_named(value):
    """terminationGracePeriodSeconds "90" stopped the check with "'<' not supported
    between instances of 'str' and 'int'"."""
    objs = render_manifests(**PSERVER, train_args=["--epochs", "2"])
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = value
    assert manifest_problems(objs) == [
        f"Job ps-worker: terminationGracePeriodSeconds must be an integer, got {value!r}"
    ]


def _with_world_size_flag(objs: list[dict], size: str) -> list[dict]:
    """``objs`` with ``--world-size size`` written into the worker Job's train arguments (as an
    edited manifest may hold it; ``render_manifests`` refuses it)."""
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["spec"]["template"]["spec"]["containers"][0]["args"] += ["--world-size", size]
    return objs


@pytest.mark.parametrize("value", ["2", 1.5, True])
def test_a_shard_count_of_no_integer_is_the_one_problem(value):
    """replicas "2" was also judged as 1 shard: "--num-shards 2 but the StatefulSet has 1
    replicas" and the workers' --pservers / DISTCONV_PSERVERS "is not the shards' DNS names"."""
    problems = _problems_with(PSERVER, "StatefulSet", ("replicas",), value)
    assert problems == [f"StatefulSet ps-pserver: replicas must be an integer >= 0, got {value!r}"]


@pytest.mark.parametrize("field", ["completions", "parallelism"])
@pytest.mark.parametrize("value", ["2", 1.5, True])
def test_a_rank_count_of_no_integer_is_the_one_problem(field, value):
    """completions 1.5 also gave "DISTCONV_WORLD_SIZE '2' != completions 1.5", "--workers 2 but
    Job ps-worker runs 1.5 ranks" and "parallelism must equal completions"."""
    problems = _problems_with(PSERVER, "Job", (field,), value)
    assert problems == [f"Job ps-worker: {field} must be an integer >= 0, got {value!r}"]


@pytest.mark.parametrize("value", ["2", 1.5])
def test_a_world_size_flag_is_not_judged_against_completions_of_no_integer(value):
    """completions "2" was read as 1 rank: "--world-size 2 but Job ps-worker runs 1 ranks"."""
    objs = _with_world_size_flag(render_manifests(**PSERVER, train_args=["--epochs", "2"]), "2")
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["spec"]["completions"] = value
    assert not [p for p in manifest_problems(objs) if "--world-size" in p]


def test_a_world_size_flag_is_still_judged_against_integer_completions():
    objs = _with_world_size_flag(render_manifests(**PSERVER, train_args=["--epochs", "2"]), "3")
    assert "--world-size 3 but Job ps-worker runs 2 ranks" in " ".join(manifest_problems(objs))


@pytest.mark.parametrize(
    ("kind", "field"),
    [("StatefulSet", "replicas"), ("Job", "completions"), ("Job", "parallelism")],
)
def test_a_whole_float_count_passes_as_kubectl_sends_it(kind, field):
    """YAML's ``replicas: 2.0`` is the integer 2 to the API server: kubectl turns the YAML into
    JSON with sigs.k8s.io/yaml, whose json.Marshal writes float64(2) as ``2``. It was refused as
    "must be an integer"."""
    assert _problems_with(PSERVER, kind, (field,), 2.0) == []


def test_a_whole_float_count_is_read_as_its_integer():
    """replicas 3.0 are 3 shards: the --num-shards 2 the workers and shards give is wrong."""
    problems = _problems_with(PSERVER, "StatefulSet", ("replicas",), 3.0)
    assert "StatefulSet ps-pserver: --num-shards 2 but the StatefulSet has 3 replicas" in problems
    assert not [p for p in problems if "must be an integer" in p]


def test_a_whole_float_grace_period_passes():
    objs = render_manifests(**PSERVER, train_args=["--epochs", "2"])
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 90.0
    assert manifest_problems(objs) == []


@pytest.mark.parametrize(("value", "runs"), [("x", ""), (2.0, " (the Job runs 2)")])
def test_an_unset_world_size_names_the_count_only_where_it_is_one(value, runs):
    objs = render_manifests(**PSERVER, train_args=["--epochs", "2"])
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["spec"]["completions"] = job["spec"]["parallelism"] = value
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    assert (
        "Job ps-worker: DISTCONV_WORLD_SIZE is not set; every rank would refuse to start" + runs
    ) in manifest_problems(objs)
