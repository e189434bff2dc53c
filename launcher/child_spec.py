"""What the launcher starts as one child of a job (:class:`ChildSpec`): its command and
environment, its prefix, its stop signals, and what its last lines say of its end
(:class:`launcher.child.Child` runs it)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .failure import TailReader


@dataclass(frozen=True)
class ChildSpec:
    """One process of the job.

    Attributes:
        role: ``"worker"``, ``"server"`` or another word (``"mpiexec"``) for the prefix.
        rank: its rank among its role.
        argv: the command.
        env: its whole environment.
        prefix: put before each of its output lines; None means ``"[role rank] "``.
        stop_signals: what a stop sends its group, in order (a shard drains at SIGTERM and
            stops at once at SIGINT: the launcher sends it both, once the workers are gone).
        fds: the launcher's file descriptors it inherits, by the same numbers (a shard's
            reserved port).
        reader: what its last lines say of its end that its status cannot (mpiexec's:
            :func:`launcher.mpi_exit.mpiexec_reader`), or None.
        quiet: which of its lines stay out of the launcher's output, not its log or tail
            (Hydra's status lines: :func:`launcher.mpi_exit.is_status_line`), or None.
    """

    role: str
    rank: int
    argv: Sequence[str]
    env: dict[str, str] = field(repr=False, default_factory=dict)
    prefix: str | None = None
    stop_signals: tuple[int, ...] = (signal.SIGTERM,)
    fds: tuple[int, ...] = ()
    reader: TailReader | None = field(default=None, repr=False)
    quiet: Callable[[str], bool] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """``worker-1``: names its log file and the failure report."""
        return f"{self.role}-{self.rank}"

    @property
    def line_prefix(self) -> bytes:
        prefix = f"[{self.role} {self.rank}] " if self.prefix is None else self.prefix
        return prefix.encode()
