"""The checkpoint errors are defined in :mod:`distconv.checkpoint_errors` but named as
:mod:`distconv.checkpoint`'s, where callers import them and where they were defined before: a
script's traceback ends ``distconv.checkpoint.CheckpointDamaged: ...`` as it did (the launcher
and the docs quote that line), and a pickle of one loads in an earlier distconv."""

from __future__ import annotations

import pickle
import pickletools
import subprocess
import sys

import pytest

from distconv import checkpoint
from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)

ERRORS = ("CheckpointError", "CheckpointDamaged", "CheckpointVersionError", "CheckpointReadError")


def test_a_scripts_traceback_names_the_error_where_callers_import_it(tmp_path):
    bad = tmp_path / "c.safetensors"
    bad.write_bytes(b"junk")
    code = (
        "import sys; from distconv.checkpoint import load_checkpoint; load_checkpoint(sys.argv[1])"
    )
    argv = [sys.executable, "-c", code, str(bad)]
    done = subprocess.run(argv, env=child_env(), capture_output=True, text=True, timeout=50)
    assert done.returncode == 1
    last = done.stderr.splitlines()[-1]
    said = f"distconv.checkpoint.CheckpointDamaged: checkpoint {bad} is unreadable (truncated or "
    assert last.startswith(said), done.stderr


@pytest.mark.parametrize("name", ERRORS)
def test_a_pickled_error_names_the_module_an_earlier_distconv_has(name):
    error = getattr(checkpoint, name)(f"checkpoint c.safetensors: {name}")
    raw = pickle.dumps(error)
    strings = [arg for _, arg, _ in pickletools.genops(raw) if isinstance(arg, str)]
    assert strings[:2] == ["distconv.checkpoint", name]
    again = pickle.loads(raw)
    assert (type(again), str(again)) == (type(error), str(error))
