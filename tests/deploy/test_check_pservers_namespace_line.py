"""Shards in ``ml``, their workers in ``default`` dialling the shards' short names: the check's
line read "--pservers 'X' is not the shards' DNS names 'X'", two equal lists, the cause only
after them. It now leads with the namespaces and gives the value to write, which passes once
written (the job's files copied from ``k8s/pserver`` and edited by hand)."""

from __future__ import annotations

import pytest

from tests.deploy.hand_edits import (
    assert_examples_still_pass,
    copied_example,
    edit,
    passes,
    problems,
)

pytestmark = pytest.mark.timeout(120)

QUALIFIED = ",".join(f"digits-ps-pserver-{i}.digits-ps-pserver.ml:5555" for i in (0, 1))


def _in(namespace: str):
    return lambda obj: obj["metadata"].update(namespace=namespace)


def _worker(job: dict) -> dict:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container


def _write_the_qualified_names(job: dict) -> None:
    container = _worker(job)
    container["args"][container["args"].index("--pservers") + 1] = QUALIFIED
    (env,) = [var for var in container["env"] if var["name"] == "DISTCONV_PSERVERS"]
    env["value"] = QUALIFIED


def test_short_names_dialled_from_another_namespace_lead_with_the_namespaces(tmp_path):
    folder = copied_example("pserver", tmp_path)
    for name in ("service-digits-ps-pserver.yaml", "statefulset-digits-ps-pserver.yaml"):
        edit(folder / name, _in("ml"))
    workers = folder / "job-digits-ps-worker.yaml"
    edit(workers, _in("default"))
    assert problems(folder) == [
        f"Job digits-ps-worker: {source} names the shards short, which resolve in namespace "
        f"default, the dialling pod's, but the shards are in ml: write {source} '{QUALIFIED}'"
        for source in ("--pservers", "DISTCONV_PSERVERS")
    ]
    edit(workers, _write_the_qualified_names)
    passes(folder)


def test_the_examples_still_pass(tmp_path):
    assert_examples_still_pass(tmp_path)
