"""A :class:`~launcher.failure.TailReader` that reads fewer lines than the report shows does
not cut the report's tail: the child keeps :data:`~launcher.failure.TAIL_LINES` at least.
Before, a reader of 5 lines (``lines=5``) left the report 5, and ``lines=0`` none at all."""

from __future__ import annotations

import pytest

from launcher.child import ChildSpec
from launcher.failure import TAIL_LINES, TailReader
from tests.launcher.real_children import run_to_exit

#: prints more lines than the report shows
SCRIPT = "i=0; while [ $i -lt 50 ]; do echo line $i; i=$((i+1)); done; exit 3"


def _last_line(tail):
    return tail[-1] if tail else None


@pytest.mark.timeout(30)
@pytest.mark.parametrize("lines", [0, 5])
def test_a_reader_of_few_lines_keeps_the_reports_tail(tmp_path, lines):
    reader = TailReader(cause=_last_line, lines=lines)
    spec = ChildSpec("worker", 0, ["sh", "-c", SCRIPT], reader=reader)
    failure = run_to_exit(tmp_path, spec).failure(restart=0)
    assert failure.tail == [f"line {i}" for i in range(50 - TAIL_LINES, 50)]
    assert (failure.exit_code, failure.cause) == (3, "line 49")
