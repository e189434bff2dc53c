"""A child's tail keeps each line up to :data:`launcher.kept_line.KEPT_LINE_BYTES`: it bounded
how many lines it kept (mpiexec's 1,024, in the tail, ``since_end`` and the lines before the
report), not how long each was, so an mpiexec printing 1 MB lines (a rank dumping an array)
held about 3 GB in the launcher. The log and the launcher's output keep the lines whole, and
mpiexec's statuses and a rank's reason are still read through long lines."""

from __future__ import annotations

import sys

import pytest

from launcher.child_spec import ChildSpec
from launcher.kept_line import KEPT_LINE_BYTES, kept_line
from launcher.mpi_exit import mpiexec_reader
from tests.launcher.real_children import run_to_exit

#: bytes of each long line: well over what the tail keeps of one
LONG = 4 * KEPT_LINE_BYTES
#: an mpiexec printing long lines, its rank 1's reason with a long message among them, then
#: Hydra's report (rank 1 exited 3: wait status 768) and more long lines; it exits 9 (the OR)
MPIEXEC = (
    "import sys\n"
    f"long = 'x' * {LONG}\n"
    "for _ in range(20):\n    print(long)\n"
    "print('[1] rank 1: SyncError: step 3 differs ' + long + '; aborting the MPI job')\n"
    "for _ in range(20):\n    print(long)\n"
    "print('[mpiexec@vm] Exit codes: [vm] 0,768')\n"
    "for _ in range(20):\n    print(long)\n"
    "sys.exit(9)\n"
)


@pytest.fixture
def child(tmp_path):
    """The mpiexec above, run to its end."""
    spec = ChildSpec("mpiexec", 0, [sys.executable, "-c", MPIEXEC], reader=mpiexec_reader(2))
    return run_to_exit(tmp_path, spec, log_name="mpiexec.log")


@pytest.mark.timeout(60)
def test_each_line_the_tail_keeps_is_bounded_the_log_keeps_it_whole(tmp_path, child):
    mark = f"[... {LONG - KEPT_LINE_BYTES} bytes cut ...]"
    kept = [*child.tail, *child.since_end, *child._before_end]
    assert max(len(line) for line in kept) == KEPT_LINE_BYTES + len(mark)
    assert kept[0] == "x" * (KEPT_LINE_BYTES // 2) + mark + "x" * (KEPT_LINE_BYTES // 2)
    logged = (tmp_path / "mpiexec.log").read_bytes().splitlines()
    assert len(logged) == 62 and logged[0] == b"x" * LONG
    assert b"x" * LONG in (tmp_path / "out").read_bytes()


@pytest.mark.timeout(60)
def test_the_ranks_status_and_reason_are_read_through_long_lines(child):
    cause = child.failure(restart=0).cause or ""
    assert cause.startswith("rank 1 ended the job: SyncError: step 3 differs xxx"), cause[:200]
    assert cause.endswith("xxx; a rank exited with code 3; mpiexec itself exited with code 9")
    assert len(cause) < 2 * KEPT_LINE_BYTES


def test_a_line_cut_inside_a_character_is_still_text():
    line = ("é" * KEPT_LINE_BYTES).encode() + b"\n"
    kept = kept_line(line)
    assert kept.startswith("é") and kept.endswith("é")
    assert f"[... {len(line) - 1 - KEPT_LINE_BYTES} bytes cut ...]" in kept
    assert kept_line(b"short\n") == "short"
