"""The names of a parameter-server job's CURVE key files (``server.key``,
``worker-R.key_secret``), and whether a folder holds any. Standard library only: the launcher
asks it of a run directory's ``keys`` before a job that may never need pyzmq imports it."""

from __future__ import annotations

import os
import re

SERVER = "server"
#: a worker's public file, its rank the group
WORKER_PUBLIC = re.compile(r"worker-(\d+)\.key$")
_KEY_FILE = re.compile(r"(server|worker-\d+)\.key(_secret)?")


def worker_name(rank: int) -> str:
    """The stem of worker ``rank``'s files: ``worker-R``."""
    return f"worker-{rank}"


def is_key_file(name: str) -> bool:
    """Whether ``name`` is one that ``distconv keys`` writes (``server.key``,
    ``worker-R.key_secret``, ...)."""
    return _KEY_FILE.fullmatch(name) is not None


def key_files(directory: str | os.PathLike) -> list[str]:
    """The names of the key files in ``directory``, sorted; none where it cannot be listed
    (not there, not a folder, not readable: writing into it says why)."""
    try:
        return sorted(entry.name for entry in os.scandir(directory) if is_key_file(entry.name))
    except OSError:
        return []


def holds_keys(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds any key file: a set, whole or not, a launch must check
    before it uses it and ``distconv keys`` must never write over."""
    return bool(key_files(directory))
