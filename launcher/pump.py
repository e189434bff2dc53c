"""What a child's output pump (:meth:`launcher.child.Child._copy`) does beside reading the
child's pipe and passing its lines on: the lines' copy in the child's log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from distconv.files import describe_os_error


def log_line(
    log: BinaryIO, line: bytes, log_path: Path, name: str, say: Callable[[str], None] | None
) -> bool:
    """Write ``line`` to child ``name``'s ``log`` (at ``log_path``); False, said once through
    ``say``, where it cannot be (a full disk): the pump must go on draining the pipe, or the
    child blocks on its next write for good."""
    try:
        log.write(line)
    except OSError as exc:
        if say is not None:
            say(
                f"cannot write {log_path}: {describe_os_error(exc)}; "
                f"{name}'s later lines go to the launcher's output only"
            )
        return False
    return True
