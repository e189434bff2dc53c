"""What a test reads off running processes: a ``distconv train`` process's health port, and
which processes name a run directory."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

SAMPLES = re.compile(rb"^distconv_samples_total\{[^}]*\} ([0-9.e+]+)", re.MULTILINE)


def trained_samples(port: int) -> float:
    """Examples the worker has trained, from /metrics; -1 while it does not answer yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            found = SAMPLES.search(reply.read())
    except OSError:
        return -1
    return float(found.group(1)) if found else -1


def processes_naming(run: Path) -> list[int]:
    """The pids of processes whose command line names ``run`` (a job's shards and workers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(run).encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:  # gone meanwhile
            continue
    return pids
