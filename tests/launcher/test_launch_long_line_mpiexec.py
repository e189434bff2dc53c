"""Under ``launcher mpi`` mpiexec's lines have no prefix, so a long line's later pieces were
marked by a bare ``+ `` (:func:`launcher.child.continued_prefix`): a rank's own line beginning
with ``+ `` (a ``set -x`` trace, on stderr, which is merged) could not be told from a piece, and
the join that docs/operations.md gives glued it to the line before. They now name the child:
``[mpiexec]+ ``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from launcher.child import READ_PIECE, ChildSpec
from tests.launcher.real_children import mpiexec_or_skip, output_lines

#: a line a piece and a bit long, then what ``bash -x`` prints of a command
PRINTER = (
    "import os\n"
    f"os.write(1, b'a' * {READ_PIECE + 5} + b'\\n')\n"
    "os.write(1, b'+ echo step 10\\n' + b'step 10\\n')\n"
)


def _joined(lines: list[bytes], marker: bytes) -> list[bytes]:
    """The lines as docs/operations.md says to join them: a ``marker`` line to the one before."""
    joined: list[bytes] = []
    for line in lines:
        if joined and line.startswith(marker):
            joined[-1] += line[len(marker) :]
        else:
            joined.append(line)
    return joined


@pytest.mark.timeout(30)
def test_an_mpiexec_long_lines_later_pieces_are_told_from_a_ranks_plus_lines(tmp_path):
    spec = ChildSpec("mpiexec", 0, [sys.executable, "-c", PRINTER], prefix="")
    lines, _ = output_lines(tmp_path, spec, "mpiexec.log")
    assert lines == [b"a" * READ_PIECE, b"[mpiexec]+ aaaaa", b"+ echo step 10", b"step 10"]
    assert _joined(lines, b"[mpiexec]+ ") == [b"a" * (READ_PIECE + 5), *lines[2:]]


def test_the_docs_give_the_mpiexec_marker():
    docs = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    assert "the later pieces begin with `[mpiexec]+ `" in docs


#: a rank's line of a few of Hydra's 64 KiB chunks
RANK_LINE = "import os; os.write(1, b'a' * 200000 + b'\\n')"


@pytest.mark.mpi
@pytest.mark.timeout(30)
def test_the_docs_say_hydra_tags_a_ranks_long_line_again_inside_it(tmp_path):
    """The docs said the join gives the line back under ``mpi`` too; it gives ``mpiexec``'s,
    in which Hydra put the rank's tag again before each chunk of the rank's line."""
    mpiexec = mpiexec_or_skip()
    version = subprocess.run(
        [mpiexec, "--version"], capture_output=True, text=True, timeout=10, check=False
    )
    if "HYDRA" not in version.stdout:
        pytest.skip("mpiexec is not MPICH's Hydra")
    printed = subprocess.run(
        [mpiexec, "-n", "1", "-prepend-rank", sys.executable, "-c", RANK_LINE],
        capture_output=True, timeout=20, check=True, cwd=tmp_path,
    ).stdout  # fmt: skip
    (line,) = printed.splitlines()
    assert line.startswith(b"[0] a") and line.count(b"[0] ") > 1
    docs = " ".join((Path(__file__).parents[2] / "docs" / "operations.md").read_text().split())
    assert "puts the rank's tag (`[0] `) again before each chunk of up to 64 KiB" in docs
