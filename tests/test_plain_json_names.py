"""How :mod:`distconv.plain_json` writes a module, a function and a lambda: alike in every
process that holds the same one (whatever its install path or its address), another text for
another one of the same short name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from distconv import plain_json
from tests.child_env import child_env, child_path

#: a config's module, as each rank's install holds it (another folder on each host or venv)
_CONFIG_MODULE = """\
def scale(x):
    return 2 * x
"""

#: what each process writes of it
_WRITE = """
import json_of_own
from distconv import plain_json
print(plain_json.dumps([json_of_own]))
"""


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The text two processes write of one config module, each imported from another folder
    (two hosts' installs): one run each, shared by the checks below."""
    written = []
    for host in ("host_a", "host_b"):
        folder = tmp_path_factory.mktemp(host)
        (folder / "json_of_own.py").write_text(_CONFIG_MODULE)
        written.append(
            subprocess.run(
                [sys.executable, "-c", _WRITE],
                capture_output=True,
                text=True,
                env=child_env(PYTHONPATH=child_path(folder)),
                timeout=50,
                check=True,
            ).stdout
        )
    return written


def test_a_module_is_written_by_its_name_not_its_install_path(installs: list[str]):
    """A module's text held its file's path (``<module 'x' from '/home/a/venv/...'>``): ranks
    on two hosts, or two venvs, that hold the same module disagreed."""
    ours, theirs = installs
    assert ours == theirs == "[\"<module 'json_of_own'>\"]\n"
    assert plain_json.plain(sys) != plain_json.plain(subprocess)
    assert str(Path(subprocess.__file__).parent) not in plain_json.dumps(subprocess)
