"""A parameter-server job rendered by the real launcher into a folder of real files, and the
edits an operator makes to them by hand: shared by the tests of the shards' and workers'
``--timeout``."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.deploy.test_manifests import validate
from tests.launcher.launch_cli import launch

#: two workers and two shards of the job ``demo``
JOB = ("--workers", "2", "--servers", "2", "--image", "d:1", "--job-name", "demo")
SHARDS = "StatefulSet demo-pserver container pserver"
WORKERS = "Job demo-worker container worker"
SHARDS_FILE = "statefulset-demo-pserver.yaml"
WORKERS_FILE = "job-demo-worker.yaml"


def rendered_folder(folder: Path, timeout: str) -> Path:
    """``distconv-launch k8s JOB --out FOLDER/out -- --epochs 1 --timeout TIMEOUT``: its folder
    of manifests, each valid against Kubernetes' own schemas."""
    out = folder / "out"
    done = launch("k8s", *JOB, "--out", str(out), "--", "--epochs", "1", "--timeout", timeout,
                  cwd=folder)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for path in out.iterdir():
        validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    return out


def container_args(path: Path) -> list[str]:
    """The args of the one container of the manifest at ``path``."""
    obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    return container["args"]


def set_timeout(path: Path, value: str) -> None:
    """Edit the ``--timeout`` of the one container of the manifest at ``path`` to ``value``,
    as an operator does by hand; the edited manifest still validates: the API server would
    take it, and only the checks can tell."""
    obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    args[args.index("--timeout") + 1] = value
    validate(obj)
    path.write_text(yaml.safe_dump(obj), encoding="utf-8")
