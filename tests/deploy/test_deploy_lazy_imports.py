"""``distconv.deploy`` loads its checks and renderer only when one of its names is used: a
module of the package (``walk``, ``check_command``) imports in milliseconds, not 150 ms."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(120)

HEAVY = ("distconv.deploy.check", "distconv.deploy.render")


def loaded_after(code: str) -> list[str]:
    """Which of :data:`HEAVY` a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    env = child_env()
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_module_of_the_package_loads_no_check_nor_the_renderer():
    assert loaded_after("import distconv.deploy.walk") == []
    assert loaded_after("import distconv.deploy") == []


def test_each_public_name_still_imports_from_the_package():
    code = (
        "from distconv.deploy import dump_yaml, manifest_problems, render_manifests, "
        "write_manifests\n"
        "from distconv.deploy import render\n"
        "import distconv.deploy as d\n"
        "assert d.manifest_problems is manifest_problems and d.render is render\n"
        "assert {'manifest_problems', 'render_manifests'} <= set(dir(d))\n"
        "assert manifest_problems([]) == [] and callable(render_manifests)\n"
    )
    assert loaded_after(code) == list(HEAVY)


def test_a_name_the_package_lacks_is_an_attribute_error():
    code = (
        "import distconv.deploy as d\n"
        "try:\n    d.no_such_name\nexcept AttributeError as exc:\n"
        "    assert 'no_such_name' in str(exc), exc\n"
        "else:\n    raise SystemExit('no AttributeError')\n"
    )
    assert loaded_after(code) == []
