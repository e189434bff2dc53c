"""``DISTCONV_NUM_THREADS`` set in the shell, as the operations guide tells a plain
``distconv train``'s user on a shared host: the launcher sizes its children's kernel threads
itself and passes it on to none, which it did without a word, so a job moved under the
launcher took more cores than its user had set. It now says so at start, naming ``--threads``;
with ``--threads`` it says nothing. Real launches of a worker program that prints its count."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, launcher_command
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import run_job

#: ``python COUNT``: the kernel threads this worker was given
COUNT = 'import os; print("threads", os.environ["DISTCONV_NUM_THREADS"])\n'
NOT_PASSED = "distconv-launch: DISTCONV_NUM_THREADS=1 in this shell is not passed on: "


def _launch(tmp_path: Path, *flags: str, shell: str = "1"):
    """A local launch of :data:`COUNT` (``flags`` before ``--``) from a shell that sets
    ``DISTCONV_NUM_THREADS=shell``; its CompletedProcess."""
    (tmp_path / "count.py").write_text(COUNT)
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", *flags]
    env = {**ENV, "DISTCONV_NUM_THREADS": shell}
    command = [*launcher_command(), *argv, "--", str(tmp_path / "count.py")]
    done = run_job(command, env=env, timeout=50, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.timeout(60)
def test_a_shell_s_kernel_threads_not_passed_on_are_said_with_the_flag_to_use(tmp_path):
    done = _launch(tmp_path)
    (given,) = [line for line in done.stdout.splitlines() if "threads" in line]
    count = given.rsplit(" ", 1)[1]
    said = f"{NOT_PASSED}each worker runs {count} kernel thread(s); pass --threads 1\n"
    assert said in done.stderr, done.stderr


@pytest.mark.timeout(60)
def test_with_threads_given_the_shell_s_count_is_not_said(tmp_path):
    done = _launch(tmp_path, "--threads", "1", shell="3")
    assert "[worker 0] threads 1" in done.stdout, done.stdout
    assert "DISTCONV_NUM_THREADS" not in done.stderr, done.stderr


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_mpi_says_it_too_where_its_ranks_size_their_own(tmp_path):
    mpiexec_or_skip()
    env = {**ENV, "DISTCONV_NUM_THREADS": "2"}
    command = [*launcher_command(), "mpi", "-np", "2", "--dry-run", "--", "--epochs", "1"]
    done = run_job(command, env=env, timeout=50, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = (
        "distconv-launch mpi: note: DISTCONV_NUM_THREADS=2 in this shell is not passed on: each "
        "rank sizes its kernel threads to its share of its host's cores; pass --threads 2"
    )
    assert said in done.stderr, done.stderr
    assert "DISTCONV_NUM_THREADS=2" not in done.stdout  # the command: not passed on indeed
