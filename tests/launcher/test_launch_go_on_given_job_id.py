"""The way on after a worker's checkpointed stop said ``give the same command --job-id t1b``
of a job launched with ``--job-id t1b``: the command has it already. It names the job id only
where the launcher chose it; a command that names its run directory (``--job-id``, in either
spelling, or ``--run-dir``, which said ``--job-id launch-...``, an id nothing needs) is "the
same command"."""

from __future__ import annotations

import pytest

from tests.launcher.launch_cli import launch

#: a worker that says a rank's checkpointed stop and exits as a SIGTERM'd rank does
STOPPED = ["sh", "-c", "echo 'distconv train: stopped by SIGTERM after step 8' >&2; exit 143"]
#: the way on's words (not imported: a test of them must not take them from the code)
WAY_ON = "with a checkpoint; to go on with this run, give the same command"
RESUME = "(and --resume auto after --, where the program takes it)"


def _way_on(tmp_path, *own: str) -> str:
    """The launcher's last line after a stand-in worker's checkpointed stop (``own``: the
    launch's options before ``--``)."""
    sizes = ("local", "--workers", "1", "--servers", "0")
    done = launch(*sizes, *own, "--", *STOPPED, cwd=tmp_path, timeout=50)
    assert "a checkpointed stop, not a crash" in done.stderr, done.stderr
    return done.stderr.splitlines()[-1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("own", [("--job-id", "t1b"), ("--job-id=t1b",), ("--run-dir", "rd")])
def test_a_command_that_names_its_run_is_given_again_as_it_is(tmp_path, own):
    line = _way_on(tmp_path, *own)
    assert line.endswith(f"{WAY_ON} {RESUME}"), line
    assert "--job-id" not in line, line


@pytest.mark.timeout(60)
def test_a_job_id_the_launcher_chose_is_named_in_the_way_on(tmp_path):
    line = _way_on(tmp_path)
    (chosen,) = [p.name for p in (tmp_path / "runs").iterdir()]
    assert line.endswith(f"{WAY_ON} --job-id {chosen} {RESUME}"), line
