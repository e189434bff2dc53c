"""Linux's ``/proc``: the fields of a process's ``stat`` file.

Two parts read it: the launcher, for which process groups still run a process that is no
zombie (:func:`launcher.child.running_groups`), and the parameter server, for whether a worker
or shard beside it has ended (:mod:`distconv.sync.ps.processes`).
"""

from __future__ import annotations

from pathlib import Path


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name: ``[state, ppid, pgrp, ...]``
    (field ``n`` of proc(5) is item ``n - 3``); None when there is no such process.

    Raises:
        OSError: the file is there but cannot be read now (no file descriptor left, hidepid,
            permissions): that says nothing of whether the process runs.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # ESRCH: it ended while being read
        return None
    # "pid (comm) state ...": the command name may hold spaces and parentheses, so the fields
    # start after the last ')'
    return text[text.rfind(")") + 2 :].split()
