"""A launched parameter-server job whose script subclasses a shipped optimizer ends in one line.

``class SignAdam(Adam)`` with its own ``_apply`` inherits the name ``adam``, and the shards,
which rebuild the optimizer by name from their own install, trained stock Adam: exit 0, other
numbers than local and MPI. The real launcher, shard and worker now end on rank 0's one line
naming the class, what the shards would build, and the way out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.sync.ps.shard_optimizer import SHARD_REGISTRY
from tests.launcher.launch_cli import launch

SCRIPT = Path(__file__).with_name("sign_adam.py")  # the user program, copied into the run


@pytest.mark.timeout(120)
def test_a_subclass_of_adam_on_the_parameter_server_ends_in_rank_0s_line(tmp_path):
    (tmp_path / "sign_adam.py").write_text(SCRIPT.read_text())
    argv = ["local", "--workers", "1", "--servers", "1", "--job-id", "sign", "--insecure"]
    done = launch(*argv, "--", "sign_adam.py", cwd=tmp_path, timeout=100)
    assert done.returncode == 1, done.stderr[-3000:]
    lines = (tmp_path / "runs" / "sign" / "logs" / "worker-0.log").read_text().splitlines()
    assert lines[-1] == (
        "sign_adam.py: error: optimizer __main__.SignAdam cannot run on the parameter server: "
        "its shards rebuild it from its config by name 'adam' and would build "
        f"distconv.optim.Adam instead; {SHARD_REGISTRY}"
    ), lines[-20:]
    assert not any(line.startswith("Traceback") for line in lines), lines[-20:]
