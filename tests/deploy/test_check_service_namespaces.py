"""The headless Service a StatefulSet names is looked up in the StatefulSet's namespace: one of
the same name in another namespace gives its pods no DNS names. The check matched Services by
name alone, across namespaces, and passed shards in ``ml`` beside their Service in
``default``, whose workers dial ``...digits-ps-pserver.ml`` names that never resolve.

A namespace a manifest leaves to ``kubectl -n`` is unknown and may be any: only two written and
different keep a Service from the pods."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.hand_edits import (
    assert_examples_still_pass,
    copied_example,
    edit,
    passes,
    problems,
)

pytestmark = pytest.mark.timeout(120)

SERVICE = "service-digits-ps-pserver.yaml"
SHARDS = "statefulset-digits-ps-pserver.yaml"
WORKERS = "job-digits-ps-worker.yaml"


def _placed(tmp_path: Path, service: str | None, shards: str, workers: str) -> Path:
    """The shipped parameter-server job with its Service, shards and workers in these
    namespaces (None: left to ``kubectl -n``), the workers dialling the shards' names qualified
    with theirs, as the check's own advice for shards in another namespace reads."""
    folder = copied_example("pserver", tmp_path)
    for name, namespace in ((SERVICE, service), (SHARDS, shards), (WORKERS, workers)):
        if namespace is not None:
            edit(folder / name, lambda obj, ns=namespace: obj["metadata"].update(namespace=ns))
    edit(folder / WORKERS, lambda job: _qualify(job, shards))
    return folder


def _qualify(job: dict, namespace: str) -> None:
    """The shards' names in the workers' ``--pservers`` and ``DISTCONV_PSERVERS``, qualified
    with the shards' ``namespace``."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    (env,) = [var for var in container["env"] if var["name"] == "DISTCONV_PSERVERS"]
    at = args.index("--pservers") + 1
    args[at] = env["value"] = args[at].replace(":5555", f".{namespace}:5555")


def test_a_service_in_another_namespace_than_its_shards_is_named(tmp_path):
    folder = _placed(tmp_path, service="default", shards="ml", workers="default")
    assert problems(folder) == [
        "StatefulSet digits-ps-pserver: serviceName 'digits-ps-pserver' names no Service of "
        "this job in its namespace, ml: Service 'digits-ps-pserver' is in default, and names "
        "only pods of its own in DNS (give it namespace: ml)"
    ]


def test_the_service_moved_beside_its_shards_passes(tmp_path):
    passes(_placed(tmp_path, service="ml", shards="ml", workers="default"))


def test_a_service_whose_namespace_is_left_to_kubectl_may_be_the_shards(tmp_path):
    passes(_placed(tmp_path, service=None, shards="ml", workers="default"))


def test_the_service_beside_the_shards_is_judged_not_its_namesake(tmp_path):
    """Of two Services of one name, the one in the shards' namespace is theirs: its
    ``publishNotReadyAddresses`` is judged, not the other's."""
    folder = _placed(tmp_path, service="ml", shards="ml", workers="default")
    namesake = folder / "service-namesake.yaml"  # read after SERVICE: the last one won
    namesake.write_text((folder / SERVICE).read_text().replace("namespace: ml", "namespace: x"))
    edit(folder / SERVICE, lambda svc: svc["spec"].pop("publishNotReadyAddresses"))
    (problem,) = problems(folder)
    assert problem.startswith(
        "StatefulSet digits-ps-pserver: Service 'digits-ps-pserver' must set "
        "publishNotReadyAddresses: true"
    ), problem


def test_the_examples_still_pass(tmp_path):
    assert_examples_still_pass(tmp_path)
