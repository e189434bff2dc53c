"""The ranks' ``--timeout``, read once for an MPIJob's watchdog check and the shards' check
(``check_timeouts.rank_seconds``), is not judged where a ``$(VAR)`` after it may replace it.

A ``$(VAR)`` after ``--timeout 20`` was left unjudged, yet one after ``--timeout=20`` (the
spelling ``distconv-launch k8s -- --timeout=20`` renders), after a switch (``--no-progress``)
or after ``--resume`` (whose value is optional) was read as a value: a ConfigMap's
``--timeout=200`` in it, the one the ranks keep, was never considered, and check-manifests
named a sound job (exit 1).
"""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(120)

#: the env entry of a ``$(EXTRA)`` only the cluster fills in: it may be ``--timeout=200``
EXTRA = {"name": "EXTRA", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}
#: the words of each check's line that tell it from every other check's
SHARDS_SAID = "for a shard's reply"
MPI_SAID = "is not below their --stall-seconds"

#: where the ``$(EXTRA)`` goes: after the ``--timeout=`` written, after a switch, after a
#: ``--resume`` with no value of its own
PLACES = {
    "after-equals-form": [],
    "after-a-switch": ["--no-progress"],
    "after-resume": ["--resume"],
}


def _container(obj: dict, path: tuple[str, ...]) -> dict:
    for key in path:
        obj = obj[key]
    (container,) = obj["template"]["spec"]["containers"]
    return container


def _ranks_timeout(container: dict, seconds: str, then: list[str]) -> None:
    """The ranks' ``--timeout`` written ``--timeout=seconds``, last but for ``then``."""
    args = container["args"]
    at = args.index("--timeout")
    del args[at : at + 2]
    args += [f"--timeout={seconds}", *then]


def _said(objs: list[dict], words: str) -> list[str]:
    return [p for p in manifest_problems(objs) if words in p]


def _with_extra(container: dict) -> None:
    container["args"].append("$(EXTRA)")
    container.setdefault("env", []).append(dict(EXTRA))


@pytest.mark.parametrize("then", PLACES.values(), ids=PLACES.keys())
def test_shards_beside_workers_whose_timeout_a_later_token_may_set_are_not_named(then):
    """Shards edited to 120 beside workers of ``--timeout=20`` are named; a ``$(EXTRA)`` after
    it may hold the ``--timeout`` the workers keep: not judged."""
    objs = render_manifests(
        job_name="d", workers=2, servers=2, image="d:1", train_args=["--timeout", "20"]
    )
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    (job,) = [o for o in objs if o["kind"] == "Job"]
    shard = _container(shards, ("spec",))
    shard["args"][shard["args"].index("--timeout") + 1] = "120"
    worker = _container(job, ("spec",))
    _ranks_timeout(worker, "20", then)
    assert len(_said(objs, SHARDS_SAID)) == 1  # judged: the check is live here
    _with_extra(worker)
    assert _said(objs, SHARDS_SAID) == []


@pytest.mark.parametrize("then", PLACES.values(), ids=PLACES.keys())
def test_an_mpijob_whose_timeout_a_later_token_may_set_is_not_judged(then):
    """An MPIJob's ranks of ``--timeout=400``, not below their ``--stall-seconds`` (300), are
    named; a ``$(EXTRA)`` after it may hold the ``--timeout`` they keep: not judged."""
    (mpijob,) = render_manifests(job_name="m", workers=2, servers=0, image="d:1", train_args=[])
    launcher = _container(mpijob, ("spec", "mpiReplicaSpecs", "Launcher"))
    _ranks_timeout(launcher, "400", then)
    assert len(_said([mpijob], MPI_SAID)) == 1
    _with_extra(launcher)
    assert _said([mpijob], MPI_SAID) == []


def test_a_var_that_is_the_timeouts_own_value_is_still_read():
    """``--timeout $(T)`` with T given in the manifest is the flag's value, not a flag: the
    MPIJob's ranks of ``$(T)`` = 400 are named."""
    (mpijob,) = render_manifests(job_name="m", workers=2, servers=0, image="d:1", train_args=[])
    launcher = _container(mpijob, ("spec", "mpiReplicaSpecs", "Launcher"))
    args = launcher["args"]
    args[args.index("--timeout") + 1] = "$(T)"
    launcher.setdefault("env", []).append({"name": "T", "value": "400"})
    assert len(_said([mpijob], MPI_SAID)) == 1


def test_a_timeout_with_no_value_is_the_ranks_refusal_not_their_default():
    """``--timeout`` last, with no value, is refused by every rank (named by the ranks' own
    check); it was read as not written, and the MPIJob named "--timeout (600, the default)"
    beside that refusal, a wait the ranks never take."""
    (mpijob,) = render_manifests(job_name="m", workers=2, servers=0, image="d:1", train_args=[])
    launcher = _container(mpijob, ("spec", "mpiReplicaSpecs", "Launcher"))
    args = launcher["args"]
    del args[args.index("--timeout") : args.index("--timeout") + 2]
    args.append("--timeout")
    problems = manifest_problems([mpijob])
    assert [p for p in problems if "--timeout: expected one argument" in p] != []
    assert [p for p in problems if MPI_SAID in p] == []
