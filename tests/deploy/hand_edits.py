"""The repo's ``k8s/`` examples copied to real files and edited by hand as an operator edits
them, then judged by the real ``distconv check-manifests``: shared by the tests of what the
check names in such edits, and of the examples (shipped and freshly rendered) that must still
pass beside them."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from distconv.deploy.render import EXAMPLES as EXAMPLE_JOBS
from distconv.deploy.render import write_examples
from tests.deploy.test_check_manifests_command import EXAMPLES, check
from tests.deploy.test_manifests import validate


def copied_example(name: str, into: Path) -> Path:
    """A copy of the shipped example ``k8s/NAME`` in folder ``into``; returns the copy."""
    return Path(shutil.copytree(EXAMPLES / name, into / name))


def edit(path: Path, change: Callable[[dict], None]) -> None:
    """Edit the one object of the manifest at ``path`` with ``change``, as an operator does by
    hand; the edited object still passes its schema (the API server would take it, and only
    the check can tell)."""
    obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(obj)
    validate(obj)
    path.write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")


def problems(*paths: Path) -> list[str]:
    """The problems ``distconv check-manifests PATHS`` names (exit 1, nothing on stderr), each
    without the places that lead it."""
    status, stdout, stderr = check(*map(str, paths))
    assert (status, stderr) == (1, ""), (status, stdout, stderr)
    return [line.partition(": ")[2] for line in stdout.splitlines()]


def passes(*paths: Path) -> None:
    """``distconv check-manifests PATHS`` finds no problem."""
    assert check(*map(str, paths)) == (0, "no problems\n", "")


def assert_examples_still_pass(folder: Path) -> None:
    """Every shipped example, and each rendered afresh into ``folder`` (as ``python -m
    distconv.deploy FOLDER`` renders them), passes its schemas and the check."""
    for path in write_examples(folder):
        validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    for name in EXAMPLE_JOBS:
        for path in sorted((EXAMPLES / name).glob("*.yaml")):
            validate(yaml.safe_load(path.read_text(encoding="utf-8")))
        passes(EXAMPLES / name)
        passes(folder / name)
