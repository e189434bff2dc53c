"""A stop of ``distconv-launch mpi`` ends the ``ssh`` processes mpiexec started, which left its
process group.

Hydra starts its ``ssh`` to each other host in a session of its own, so the launcher's kill of
mpiexec's process group missed it: after a SIGTERM to a launch whose hosts never answered ssh,
mpiexec had ended and each ``ssh`` ran on (for good, where the host never answers)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, start_unread, stderr_once_gone, stop_when
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import job_env

#: Hydra's ssh (``HYDRA_LAUNCHER_EXEC``) to a host that never answers: it notes its
#: ``/proc/<pid>/stat`` (the pid first, the session sixth) and waits, as ssh for a banner
HUNG_SSH = """#!/bin/sh
read -r stat < /proc/$$/stat
echo "$stat" >> "$0.started"
exec sleep 60
"""


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_a_stop_ends_the_ssh_that_left_mpiexecs_group(tmp_path: Path):
    mpiexec_or_skip()
    ssh = tmp_path / "ssh"
    ssh.write_text(HUNG_SSH)
    ssh.chmod(0o755)
    started = tmp_path / "ssh.started"
    (tmp_path / "hello.py").write_text("print('hello')\n")
    # 127.0.0.2 and .3 are this host, but to Hydra other hosts, reached through its ssh
    hosts = "127.0.0.2:1,127.0.0.3:1"
    argv = ["mpi", "-np", "2", "-H", hosts, "--run-dir", "run", "--", "hello.py"]
    both = lambda: started.exists() and len(started.read_text().splitlines()) == 2  # noqa: E731
    with job_env({**ENV, "HYDRA_LAUNCHER_EXEC": str(ssh)}) as env:
        with open(tmp_path / "stderr", "w+") as err:
            launcher = start_unread(argv, env, tmp_path, err)
            status, took = stop_when(both, launcher, "both hosts' ssh")
            stderr = stderr_once_gone(env, err)  # the ssh processes too: nothing of the job left
    assert status == 128 + signal.SIGTERM, stderr
    assert took < 10, (took, stderr)  # not the grace's 30 s: mpiexec ends at its SIGTERM
    stats = [line.split() for line in started.read_text().splitlines()]
    assert [fields[0] == fields[5] for fields in stats] == [True, True], stats  # own sessions
