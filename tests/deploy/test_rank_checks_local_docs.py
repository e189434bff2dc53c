"""docs/kubernetes.md said a launcher's pair's local rank must be 0 beside the Job index, but the
check, as placement does, holds only the first pair's to 0 and each later one to the first's
where both are set: ``MPI_LOCALRANKID=1`` beside a ``RANK`` with no ``LOCAL_RANK``
passes, and the rank then takes 1 as its local rank, which moves its health port off the one its
probes ask. The check now refuses a local rank other than 0 that the rank takes;
each statement of the docs is held to the check, the pods started for real and the runtime."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.runtime import detect_runtime
from tests.deploy.index_pods import trains
from tests.deploy.job_shapes import kubernetes_doc_text, workers_job

pytestmark = pytest.mark.timeout(60)

_INDEX = "$(JOB_COMPLETION_INDEX)"
_PAIRS = [f"RANK={_INDEX}", "WORLD_SIZE=3", f"PMI_RANK={_INDEX}", "PMI_SIZE=3"]


def test_the_first_pairs_local_rank_is_held_to_the_index_as_the_docs_say(tmp_path):
    assert (
        "the first pair's local rank (`RANK`'s before `OMPI_...`'s before `PMI_...`'s), where "
        "set, 0 beside the index, and each later pair's, where both are set, the first's"
    ) in kubernetes_doc_text()
    job = workers_job(3, ["env", *_PAIRS, "LOCAL_RANK=1", "MPI_LOCALRANKID=1"])
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) != []


def test_a_later_pairs_local_rank_is_refused_as_the_docs_say(tmp_path):
    """Placement accepts it and the rank takes it, so its health port moves off the one its
    probes ask: the check refuses it."""
    text = kubernetes_doc_text()
    assert "So `MPI_LOCALRANKID=1` beside a `RANK` with no `LOCAL_RANK` is refused" in text
    assert "set the local rank to 0 in every pair that sets one" in text
    job = workers_job(3, ["env", *_PAIRS, "MPI_LOCALRANKID=1"])
    assert trains(job, tmp_path)
    (problem,) = manifest_problems([job])
    assert "MPI_LOCALRANKID '1' gives the pod's one rank a local rank other than 0" in problem
    (container,) = job["spec"]["template"]["spec"]["containers"]
    named = container["readinessProbe"]["httpGet"]["port"]
    (probed,) = (p["containerPort"] for p in container["ports"] if p.get("name") == named)
    port = int(container["args"][container["args"].index("--health-port") + 1])
    env = {"RANK": "2", "WORLD_SIZE": "3", "PMI_RANK": "2", "PMI_SIZE": "3"}
    env |= {"MPI_LOCALRANKID": "1", "JOB_COMPLETION_INDEX": "2", "DISTCONV_WORLD_SIZE": "3"}
    local = detect_runtime(environ=env).local_rank
    assert (local, port + local) == (1, probed + 1)  # distconv.job: port + local rank
