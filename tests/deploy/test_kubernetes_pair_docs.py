"""docs/kubernetes.md says what a launcher's pair and ``--world-size`` do to an Indexed Job's
ranks (it said only that a command line that drops the index makes every rank
rank 0 of 1). Its examples are held to the check and to the pods started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import kubernetes_doc_text, workers_job

pytestmark = pytest.mark.timeout(60)

_INDEX = "$(JOB_COMPLETION_INDEX)"


def test_a_pair_after_env_i_places_the_ranks_as_the_docs_say(tmp_path):
    assert (
        "rank 0 of 1, unless the command line sets a launcher's pair itself "
        f"(`env -i RANK={_INDEX} WORLD_SIZE=4`" in kubernetes_doc_text()
    )
    job = workers_job(4, ["env", "-i", f"RANK={_INDEX}", "WORLD_SIZE=4"])
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


def test_the_world_size_flag_wins_as_the_docs_say(tmp_path):
    assert (
        "`--world-size 4` beside a `DISTCONV_WORLD_SIZE` of 5 trains as 4" in kubernetes_doc_text()
    )
    job = workers_job(4, [])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], "--world-size", "4"]
    container["env"] = [
        *(v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"),
        {"name": "DISTCONV_WORLD_SIZE", "value": "5"},
    ]
    assert start_pod(job, 3, tmp_path).placed == (3, 4)
    assert manifest_problems([job]) == []


def test_the_index_in_the_pods_env_is_refused_as_the_docs_say(tmp_path):
    assert f"so `RANK: {_INDEX}` there is left as written" in kubernetes_doc_text()
    job = workers_job(2, [])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["env"] = [
        *container["env"],
        {"name": "RANK", "value": _INDEX},
        {"name": "WORLD_SIZE", "value": "2"},
    ]
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) != []
