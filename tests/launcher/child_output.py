"""A real child's output lines as the launcher's output got them: what the long-line tests
read (:func:`tests.launcher.real_children.run_to_exit` runs the child)."""

from __future__ import annotations

from pathlib import Path

from launcher.child import Child, ChildSpec
from tests.launcher.real_children import run_to_exit


def output_lines(
    tmp_path: Path, spec: ChildSpec, log_name: str | None = None
) -> tuple[list[bytes], Child]:
    """``spec`` run to its end (:func:`run_to_exit`, its log ``log_name`` in ``tmp_path``):
    the lines of the launcher's output it gave, without their newlines, and the child."""
    child = run_to_exit(tmp_path, spec, log_name)
    return (tmp_path / "out").read_bytes().splitlines(), child
