"""The examples of ``k8s/`` as real files in a test's folder, checked in or freshly rendered,
the hand edits an operator makes to them, and the real ``distconv check-manifests`` run on
the result: shared by the tests of the lines the check gives for edited examples."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.deploy.test_check_manifests_command import EXAMPLES, check, in_a_child
from tests.deploy.test_manifests import validate


def copied(folder: Path, *examples: str) -> list[Path]:
    """Each checked-in example (``pserver``, ``mpijob``...) copied to ``folder``; their folders."""
    return [Path(shutil.copytree(EXAMPLES / name, folder / name)) for name in examples]


def rendered(folder: Path, *examples: str) -> list[Path]:
    """Each example freshly rendered by ``python -m distconv.deploy`` under ``folder``; their
    folders."""
    out = folder / "fresh"
    done = in_a_child("-m", "distconv.deploy", str(out), text=True)
    assert done.returncode == 0, done.stderr
    return [out / name for name in examples]


def edited(path: Path, edit: Callable[[dict], None]) -> None:
    """The manifest at ``path`` changed by ``edit`` as an operator changes it by hand; it still
    validates against its schema, so only the checks can tell what is wrong."""
    obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(obj)
    written(path, obj)


def written(path: Path, obj: dict) -> Path:
    """``obj``, valid against its schema, written to ``path`` as an operator's own manifest."""
    validate(obj)
    path.write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")
    return path


def assert_no_problems(*paths: Path) -> None:
    """The check, run on ``paths`` together, finds nothing; every manifest in them validates."""
    for path in paths:
        for file in sorted(path.glob("*.yaml")) if path.is_dir() else [path]:
            for obj in yaml.safe_load_all(file.read_text(encoding="utf-8")):
                validate(obj)
    assert check(*map(str, paths)) == (0, "no problems\n", "")


def one_problem(*paths: Path) -> tuple[list[str], str]:
    """The one line the check gives for ``paths`` together (exit status 1, nothing on
    stderr): the files it locates the problem in, and what it says after them."""
    status, stdout, stderr = check(*map(str, paths))
    assert (status, stderr) == (1, ""), stdout + stderr
    (line,) = stdout.splitlines()
    where, _, what = line.partition(": ")
    return sorted(place.rpartition(":")[0] for place in where.split(", ")), what
