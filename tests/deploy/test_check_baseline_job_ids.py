"""A baseline run beside the shards keeps a job id of its own: ``distconv check-manifests``
compares job ids only for ranks that reach the shards.

A rank that trains with ``--sync local`` or ``mpi`` never says hello to the shards, and the
count checks leave it out of their world (docs/kubernetes.md, Counting the ranks). The job-id
comparison did not: ``k8s/pserver`` beside ``k8s/mpijob`` was refused as "the shards would
refuse every worker's hello", and so was a one-pod ``--sync local`` Job beside the shards,
which passed only once it took the shards' job id, the wrong advice.

Each test copies or freshly renders the examples into real files, edits them as an operator
would, and runs the real check command on them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.deploy.hand_edits import (
    copied_examples,
    edit,
    one_problem,
    passes,
    rendered_examples,
    written,
)

pytestmark = pytest.mark.timeout(120)

#: each parameter-server example beside the MPIJob of the same hardware
PAIRS = [("pserver", "mpijob"), ("pserver-gpu", "mpijob-gpu")]


@pytest.mark.parametrize("made", [copied_examples, rendered_examples], ids=["checked-in", "fresh"])
@pytest.mark.parametrize(("shards", "mpi"), PAIRS)
def test_an_mpijob_beside_the_shards_keeps_its_own_job_id(tmp_path, made, shards, mpi):
    passes(*made(tmp_path, shards, mpi))


def _baseline(workers_job: Path, sync: list[str]) -> dict:
    """The shards' workers' Job made a one-pod baseline of its own, as an operator makes it:
    named ``digits-baseline``, its job id that too, training with ``sync`` (``--sync local``,
    or no ``--sync`` and no shards named), without the shards' list nor their keys."""
    job = yaml.safe_load(workers_job.read_text(encoding="utf-8"))
    job["metadata"]["name"] = "digits-baseline"
    job["spec"].update(completions=1, parallelism=1)
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        labels["app.kubernetes.io/instance"] = "digits-baseline"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    at = args.index("--sync")
    del args[at : at + 6]  # --sync pserver --pservers ... --keys ...
    args[2:2] = sync
    own = {"DISTCONV_JOB_ID": "digits-baseline", "DISTCONV_WORLD_SIZE": "1"}
    container["env"] = [
        {**var, "value": own.get(var["name"], var.get("value"))}
        for var in container["env"]
        if var["name"] not in ("DISTCONV_PSERVERS", "DISTCONV_KEYS")
    ]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "keys"]
    pod["volumes"] = [v for v in pod["volumes"] if v["name"] != "keys"]
    return job


@pytest.mark.parametrize("sync", [["--sync", "local"], []], ids=["sync-local", "no-shards"])
def test_a_local_baseline_job_beside_the_shards_keeps_its_own_job_id(tmp_path, sync):
    (shards,) = copied_examples(tmp_path, "pserver")
    baseline = _baseline(shards / "job-digits-ps-worker.yaml", sync)
    passes(shards, written(tmp_path / "job-digits-baseline.yaml", baseline))


def test_the_shards_own_workers_are_still_held_to_their_job_id(tmp_path):
    """The workers' Job that reaches the shards, given another job id by hand, is named."""
    (shards,) = copied_examples(tmp_path, "pserver")
    workers = shards / "job-digits-ps-worker.yaml"

    def other_job_id(job: dict) -> None:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        (var,) = [v for v in container["env"] if v["name"] == "DISTCONV_JOB_ID"]
        var["value"] = "digits-baseline"

    edit(workers, other_job_id)
    files, what = one_problem(shards)
    assert files == [str(workers), str(shards / "statefulset-digits-ps-pserver.yaml")]
    assert what == (
        "Job digits-ps-worker container worker: job id 'digits-baseline' (DISTCONV_JOB_ID) but "
        "StatefulSet digits-ps-pserver container pserver serves 'digits-ps' (DISTCONV_JOB_ID): "
        "the shards would refuse every worker's hello"
    )
