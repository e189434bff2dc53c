"""Every rank of a parameter-server job refuses an optimizer the shards would not run, in the
same one line, before its hello.

Rank 0 alone refused it, at its seed (after the hello and the job check); rank 1 then stopped
on rank 0's bye in its barrier, exit 75, with a ``PeerFailed`` traceback quoting rank 0's
error. Two real worker processes of a script (``run_main``) and one real shard.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ps_helpers import script_ranks

from distconv.sync.ps.shard_optimizer import SHARD_REGISTRY

#: the user program: a subclass of Adam that inherits its name
SCRIPT = Path(__file__).parents[2] / "launcher" / "sign_adam.py"

REFUSED = (
    "sign_adam.py: error: optimizer __main__.SignAdam cannot run on the parameter server: its "
    "shards rebuild it from its config by name 'adam' and would build distconv.optim.Adam "
    f"instead; {SHARD_REGISTRY}"
)


@pytest.mark.timeout(120)
def test_both_ranks_of_a_subclass_of_adam_say_the_one_line(shards, tmp_path):
    (endpoint,) = shards.start(1, 2, extra=["--timeout", "5"])
    script = tmp_path / "sign_adam.py"
    script.write_text(SCRIPT.read_text())
    ended = script_ranks([sys.executable, str(script)], endpoint, 90)
    for rank, (code, err) in enumerate(ended):
        assert code == 1, (rank, err[-2000:])
        assert err.strip().splitlines()[-1] == REFUSED, (rank, err[-2000:])
        assert "Traceback" not in err, (rank, err[-2000:])
    assert "seeded with" not in shards.log_text()
