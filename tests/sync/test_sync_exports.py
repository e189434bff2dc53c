"""``distconv.sync`` gives the transports' classes, ``LocalSync``, ``PServerSync`` and ``MPISync``,
which live at three depths (``sync.local``, ``sync.ps.client``, ``sync.mpi``), when first asked
for: ``import distconv.sync`` (and its star import) still loads neither pyzmq nor mpi4py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)

_PROBE = """
import json, sys

def loaded():
    return sorted(m for m in ("zmq", "mpi4py") if m in sys.modules)

import distconv.sync as package
exec("from distconv.sync import *", {})
seen = {"import": loaded(), "listed": sorted(
    n for n in ("LocalSync", "PServerSync", "MPISync") if n in dir(package))}
from distconv.sync import LocalSync
seen["LocalSync"] = loaded()
from distconv.sync import MPISync
seen["MPISync"] = loaded()
from distconv.sync import PServerSync
from distconv.sync.local import LocalSync as local
from distconv.sync.mpi import MPISync as mpi
from distconv.sync.ps.client import PServerSync as ps
seen["same"] = [LocalSync is local, PServerSync is ps, MPISync is mpi]
classes = (LocalSync, PServerSync, MPISync)
seen["made"] = [c.__name__ for c in classes if issubclass(c, package.SyncStrategy)]
print(json.dumps(seen))
"""


def test_the_transports_classes_come_from_distconv_sync_without_loading_their_libraries():
    """Before, ``from distconv.sync import LocalSync`` was an ImportError; each class is the one
    its own module defines, and asking for ``LocalSync`` loads neither pyzmq nor mpi4py."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=child_env(), timeout=50
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "import": [],
        "listed": ["LocalSync", "MPISync", "PServerSync"],
        "LocalSync": [],
        "MPISync": [],  # mpi4py waits for an MPISync made (its comm)
        "same": [True, True, True],
        "made": ["LocalSync", "PServerSync", "MPISync"],
    }
