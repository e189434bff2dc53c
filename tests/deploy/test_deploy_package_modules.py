"""``import distconv.deploy`` then ``distconv.deploy.render.X``: the package's modules are its
attributes as they were before its public names loaded lazily (f8cec31)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(120)


def run_fresh(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter that imports this checkout."""
    env = child_env()
    argv = [sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize(
    "attribute", ["render.render_manifests", "check.manifest_problems", "walk.as_applied"]
)
def test_a_module_of_the_package_is_an_attribute_of_it(attribute):
    """Before f8cec31 the package's eager imports set ``render``, ``check`` and every module
    they import; code written against that (``d.render.render_manifests``) must still run."""
    done = run_fresh(f"import distconv.deploy as d\nprint(callable(d.{attribute}))")
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")


def test_a_name_neither_public_nor_a_module_is_still_an_attribute_error():
    done = run_fresh(
        "import distconv.deploy as d\n"
        "try:\n    d.no_such_module\nexcept AttributeError as exc:\n    print(exc)\n"
    )
    assert done.stdout == "module 'distconv.deploy' has no attribute 'no_such_module'\n"
    assert done.returncode == 0, done.stderr
