"""``distconv train`` refuses local sync on a rank of several in its own words, not a script's
(``as a script's init() picks itself``)."""

from __future__ import annotations

import pytest

from tests.test_cli import _assert_one_line_error, distconv

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("sync", "why"),
    [(["--sync", "local"], "(--sync local)"), ([], "(picked: no --pservers, no MPI launcher)")],
)
def test_local_sync_on_a_rank_of_two_is_refused_in_the_command_s_words(tmp_path, sync, why):
    proc = distconv("train", *sync, "--rank", "1", "--world-size", "2", cwd=tmp_path, timeout=50)
    _assert_one_line_error(
        proc,
        f"this process is rank 1 of 2 (flags), but local sync trains alone {why}",
        "use --sync pserver or mpi, or leave --sync out and distconv train picks it itself",
    )
    assert "init()" not in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []  # refused before a run directory or a data set
