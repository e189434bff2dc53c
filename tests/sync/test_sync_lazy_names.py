"""``distconv.sync`` gives ``SyncError`` and ``SyncStrategy`` when first asked for (PEP 562):
each way of reaching them still works, and catching ``SyncError`` loads no numpy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(30)

_PROBE = """
import json, pickle, sys, typing
from distconv.sync import JobRefused, SyncError
numpy = "numpy" in sys.modules
star = {}
exec("from distconv.sync import *", star)
import distconv.sync as package
from distconv.sync import base
error = pickle.loads(pickle.dumps(SyncError("gone")))
print(json.dumps({
    "numpy": numpy,
    "star": sorted(k for k in star if not k.startswith("__")),
    "same": star["SyncError"] is SyncError is base.SyncError
    and star["SyncStrategy"] is base.SyncStrategy,
    "pickled": [type(error) is SyncError, str(error)],
    "dir": sorted({"JobRefused", "SyncError", "SyncStrategy"} & set(dir(package))),
    "refused": issubclass(JobRefused, SyncError) and star["JobRefused"] is JobRefused,
    "hints": typing.get_type_hints(package.create_sync)["return"] is base.SyncStrategy,
}))
"""


def test_sync_error_costs_no_numpy_and_every_way_to_the_lazy_names_works():
    """``from distconv.sync import SyncError`` loaded SyncStrategy's module, and numpy with it
    (about 95 ms), for a class defined in distconv.sync.errors, which loads nothing; the names
    were also missing from ``dir()``, and ``typing.get_type_hints`` of ``create_sync`` never
    found ``SyncStrategy``, even once it was asked for."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=child_env(), timeout=25
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "numpy": False,
        "star": ["JobRefused", "SyncError", "SyncStrategy", "TRANSPORTS", "create_sync"],
        "same": True,
        "pickled": [True, "gone"],
        "dir": ["JobRefused", "SyncError", "SyncStrategy"],
        "refused": True,
        "hints": True,
    }
