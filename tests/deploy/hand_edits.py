"""The repo's ``k8s/`` examples copied, or a job rendered by the real launcher, into real
files; the edits an operator makes to them by hand, each still valid against the schemas the
deploy tests use (the API server would take it, and only the check can tell); and the real
``distconv check-manifests`` run on them: shared by the tests of what the check names in such
edits, and of the examples (shipped and freshly rendered) that must still pass beside them."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from distconv.deploy.render import EXAMPLES as EXAMPLE_JOBS
from distconv.deploy.render import write_examples
from tests.deploy.test_check_manifests_command import EXAMPLES, check
from tests.deploy.test_manifests import validate
from tests.launcher.launch_cli import launch


def copied_example(name: str, into: Path) -> Path:
    """A copy of the shipped example ``k8s/NAME`` in folder ``into``, each of its manifests
    valid; returns the copy."""
    folder = Path(shutil.copytree(EXAMPLES / name, into / name))
    _validated(folder)
    return folder


def copied_examples(into: Path, *names: str) -> list[Path]:
    """Each shipped example ``k8s/NAME`` of ``names`` copied into folder ``into``
    (:func:`copied_example`); their copies."""
    return [copied_example(name, into) for name in names]


def rendered_examples(into: Path, *names: str) -> list[Path]:
    """Each example of ``names`` freshly rendered under ``into`` as ``python -m distconv.deploy
    FOLDER`` renders them, each of its manifests valid; their folders (a drop-in for
    :func:`copied_examples`, to hold the shipped files and a fresh render to one rule)."""
    out = into / "fresh"
    write_examples(out)
    for name in names:
        _validated(out / name)
    return [out / name for name in names]


def rendered(tmp_path: Path, *argv: str) -> Path:
    """The folder ``distconv-launch k8s ARGV --out ...`` writes, each manifest valid; train
    arguments may follow a ``--`` in ``argv``, as on the command line."""
    out = tmp_path / "rendered"
    at = argv.index("--") if "--" in argv else len(argv)
    done = launch("k8s", *argv[:at], "--out", str(out), *argv[at:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _validated(out)
    return out


#: a parameter-server job of two workers and two shards, ``demo``, as :func:`rendered_demo`
#: renders it: its objects as a line names them, and their files
DEMO_JOB = ("--workers", "2", "--servers", "2", "--image", "d:1", "--job-name", "demo")
DEMO_SHARDS = "StatefulSet demo-pserver container pserver"
DEMO_WORKERS = "Job demo-worker container worker"
DEMO_SHARDS_FILE = "statefulset-demo-pserver.yaml"
DEMO_WORKERS_FILE = "job-demo-worker.yaml"


def rendered_demo(tmp_path: Path, timeout: str) -> Path:
    """``distconv-launch k8s DEMO_JOB -- --epochs 1 --timeout TIMEOUT`` (:func:`rendered`): its
    folder of manifests, each valid."""
    return rendered(tmp_path, *DEMO_JOB, "--", "--epochs", "1", "--timeout", timeout)


def edit(path: Path, change: Callable[[dict], None]) -> Path:
    """Edit the one object of the manifest at ``path`` with ``change``, as an operator does by
    hand; the edited object still passes its schema. Returns ``path``."""
    obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(obj)
    return written(path, obj)


def written(path: Path, obj: dict) -> Path:
    """``obj``, valid against its schema, written to ``path`` as an operator's own manifest;
    returns ``path``."""
    validate(obj)
    path.write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")
    return path


#: the shipped parameter-server example's workers and shards, as files of it
PS_WORKERS_FILE = "job-digits-ps-worker.yaml"
PS_SHARDS_FILE = "statefulset-digits-ps-pserver.yaml"


def one_container(obj: dict) -> dict:
    """The one container of the pod template of ``obj``, a Job or a StatefulSet."""
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    return container


def container_args(path: Path) -> list[str]:
    """The args of the one container of the one object of the manifest at ``path``."""
    return one_container(yaml.safe_load(path.read_text(encoding="utf-8")))["args"]


def set_timeout(path: Path, value: str) -> Path:
    """Edit the ``--timeout`` written in the args of the one container of the manifest at
    ``path`` to ``value``, as an operator does by hand (:func:`edit`). Returns ``path``."""

    def change(obj: dict) -> None:
        args = one_container(obj)["args"]
        args[args.index("--timeout") + 1] = value

    return edit(path, change)


def problems(*paths: Path) -> list[str]:
    """The problems ``distconv check-manifests PATHS`` names (exit 1, nothing on stderr), each
    without the places that lead it."""
    return [what for _, what in located_problems(*paths)]


def located_problems(*paths: Path) -> list[tuple[list[str], str]]:
    """Each line of ``distconv check-manifests PATHS`` as the files it locates the line in and
    the line past its location; it must exit 1 and write nothing on stderr."""
    status, stdout, stderr = check(*map(str, paths))
    assert (status, stderr) == (1, ""), (status, stdout, stderr)
    located = [line.partition(": ") for line in stdout.splitlines()]
    return [
        (sorted(place.rpartition(":")[0] for place in where.split(", ")), what)
        for where, _, what in located
    ]


def one_problem(folder: Path) -> tuple[list[str], str]:
    """The files ``distconv check-manifests FOLDER`` locates its one line in, and the line past
    its location."""
    ((files, what),) = located_problems(folder)
    return files, what


def passes(*paths: Path) -> None:
    """``distconv check-manifests PATHS`` finds no problem."""
    status, stdout, stderr = check(*map(str, paths))
    assert (status, stdout, stderr) == (0, "no problems\n", ""), stdout + stderr


def assert_examples_still_pass(folder: Path) -> None:
    """Every shipped example, and each rendered afresh into ``folder`` (as ``python -m
    distconv.deploy FOLDER`` renders them), passes its schemas and the check."""
    for path in write_examples(folder):
        validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    for name in EXAMPLE_JOBS:
        _validated(EXAMPLES / name)
        passes(EXAMPLES / name)
        passes(folder / name)


def pod_spec(obj: dict, replica: str | None = None) -> dict:
    """The pod spec of a Job's template, or of an MPIJob's ``replica``."""
    spec = obj["spec"]
    return (spec["mpiReplicaSpecs"][replica] if replica else spec)["template"]["spec"]


def _validated(folder: Path) -> None:
    paths = sorted(folder.glob("*.yaml"))
    assert paths, folder
    for path in paths:
        validate(yaml.safe_load(path.read_text(encoding="utf-8")))
