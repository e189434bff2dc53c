"""A blank ``--hostfile``, ``-H`` or ``--mpiexec`` (an unset variable: ``--hostfile "$NODES"``)
is a usage error, as a blank ``--run-dir`` is: it was taken for the flag left out, so a job
meant for other hosts started every rank on this one, under PATH's mpiexec."""

from __future__ import annotations

import pytest

from tests.launcher.launch_cli import launch


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flag", ["--hostfile", "-H", "--hosts", "--mpiexec"])
@pytest.mark.parametrize("blank", ["", " "])
def test_a_blank_host_list_or_mpiexec_is_a_usage_error(tmp_path, flag, blank):
    done = launch("mpi", "-np", "4", flag, blank, "--mpi-flavor", "mpich", "--dry-run",
                  "--", "--epochs", "1", cwd=tmp_path, timeout=50)  # fmt: skip
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    named = "-H/--hosts" if flag in ("-H", "--hosts") else flag
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"distconv-launch mpi: error: argument {named}: must not be empty", last
    assert list(tmp_path.iterdir()) == []  # nothing made
