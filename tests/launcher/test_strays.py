"""The processes a child started that left its group are found and killed, and no other:
not the group's own (its signal is the group's), not a process outside the child's tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from distconv import procfs
from distconv.procfs import descendants, process_stat
from launcher.strays import Strays
from tests.launcher.real_children import wait_until
from tests.processes import job_env

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

#: a child whose own process group holds a sleep, and which starts another in a session of
#: its own (as Hydra its ssh), noting that one's pid
TREE = 'sleep 30 & setsid sh -c \'echo $$ > "$0"; exec sleep 30\' "$0" & wait'


def _running(pid: int) -> bool:
    stat = process_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("children_files", [True, False], ids=["children-files", "stat-scan"])
def test_only_the_descendants_outside_the_group_are_killed(tmp_path, monkeypatch, children_files):
    """Also where the kernel lists no task's children (no ``CONFIG_PROC_CHILDREN``: a
    monkeypatch, as this kernel has them), from a look at every process's parent."""
    monkeypatch.setattr(procfs, "_CHILDREN_FILES", children_files and procfs._CHILDREN_FILES)
    noted = tmp_path / "stray"
    with job_env(os.environ) as env:  # the stray too, gone at its end, whatever happens
        child = subprocess.Popen(["sh", "-c", TREE, str(noted)], env=env, start_new_session=True)
        # no descendant of the child: never signalled, though it left no group of the child's
        other = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
        _look(child, other, noted)


def _look(child: subprocess.Popen, other: subprocess.Popen, noted: Path) -> None:
    """Strays of ``child`` (whose stray writes its pid to ``noted``) looked for and killed."""
    strays = Strays()
    try:
        wait_until(lambda: noted.exists() and noted.read_text().strip(), "the stray's pid")
        stray = int(noted.read_text())
        wait_until(lambda: len(descendants(child.pid)) == 2, "the child's two sleeps")
        found = {pid: group for pid, group, _ in descendants(child.pid)}
        assert found[stray] == stray  # a group (and a session) of its own
        [member] = [pid for pid, group in found.items() if group == child.pid]
        strays.look(child.pid)
        strays.kill()
        wait_until(lambda: not _running(stray), "the stray's end")
        assert _running(member) and _running(other.pid) and _running(child.pid)
    finally:
        strays.close()
        os.killpg(child.pid, 9)
        other.kill()
        child.wait()
        other.wait()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("children_files", [True, False], ids=["children-files", "stat-scan"])
def test_a_pid_listed_as_a_child_but_now_anothers_is_not_taken(monkeypatch, children_files):
    """The look lists a child's pid, then reads its stat: a child that ended and was reaped
    meanwhile, its pid given to an unrelated process, was taken for a stray, which the stop's
    end then SIGKILLed. That window (microseconds, a whole /proc scan without children files)
    cannot be hit on purpose: a monkeypatch lists an unrelated process as the child's."""
    with job_env(os.environ) as env:
        child = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
        other = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
        listed = lambda pid: [other.pid] if pid == child.pid else []  # noqa: E731
        monkeypatch.setattr(procfs, "_CHILDREN_FILES", children_files)
        if children_files:
            monkeypatch.setattr(procfs, "_children", listed)
        else:
            monkeypatch.setattr(procfs, "_scan_children", lambda: listed)
        strays = Strays()
        try:
            assert descendants(child.pid) == []
            strays.look(child.pid)
            strays.kill()
            assert _running(other.pid)
        finally:
            strays.close()
            child.kill()
            other.kill()
            child.wait()
            other.wait()
