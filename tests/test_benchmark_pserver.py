"""``benchmarks/pserver.py`` when a shard cannot start: it says so, and leaves nothing running."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.probes import run_as_group

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "pserver.py"


@pytest.mark.timeout(120)
def test_a_shard_that_cannot_start_is_named_with_its_status_and_stderr(tmp_path):
    """A shard that ended before printing its address (here a ``--code`` checkout whose
    ``python -m distconv`` fails) stopped the benchmark with ``IndexError: list index out of
    range``, its stderr thrown away."""
    shutil.copytree(ROOT / "distconv", tmp_path / "distconv")
    (tmp_path / "distconv" / "__main__.py").write_text('raise SystemExit("no shard here")\n')
    argv = [sys.executable, str(BENCH), "--code", str(tmp_path), "--mb", "1", "--params", "2"]
    # the benchmark, its echoes and shards: one group, whose leader's pid it keeps
    proc, out, err = run_as_group([*argv, "--repeat", "1", "--modes", "insecure"], 90)
    assert proc.returncode == 1, out + err
    assert "IndexError" not in err
    assert "-m distconv pserver" in err and "exited with status 1 before saying where" in err
    assert "no shard here" in err
    assert out.startswith("# numpy's BLAS: ")  # which kernels, as the other benchmarks say
    with pytest.raises(ProcessLookupError):  # the echoes started before it were stopped
        os.killpg(proc.pid, 0)
