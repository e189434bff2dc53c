"""What docs/operations.md ("Your own script") says a script under ``run_main`` prints under
``mpiexec -n 2`` for a label past the classes is what each rank prints. The check comes after
the job check, with the sync set up, so each rank aborts the job in its one line; the docs said
a rank that refuses its data ends as ``script.py: error: ...``, the form of the refusals before
setup (a NaN, an empty set) alone."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(90)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "user_data_script.py")


def _quoted_label_line() -> tuple[str, str]:
    """The line operations.md quotes for a label past the classes under MPI, up to its '...'."""
    text = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    found = re.search(
        r"`(rank 0: DataError: the training set's 'label' [^`]*?)\.\.\.; ([^`]*)`", text
    )
    assert found is not None, "operations.md quotes no rank's line for a label past the classes"
    return found.group(1), found.group(2)


def test_a_label_past_the_classes_ends_each_rank_as_the_docs_quote():
    head, ending = _quoted_label_line()
    done = run_mpi(["-n", "2", sys.executable, SCRIPT, "label", "all"], timeout=60)
    assert done.returncode == 1, done.stderr[-3000:]
    said = sorted(line for line in done.stderr.splitlines() if not line.startswith("Abort("))
    assert len(said) == 2, said
    for rank, line in enumerate(said):
        assert line.startswith(head.replace("rank 0", f"rank {rank}")), (head, line)
        assert line.endswith(f"; {ending}"), (ending, line)
