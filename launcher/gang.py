"""The gang's children as the supervisor looks at them and stops them: which failed first,
their stop signals, whether any of their groups still runs, and whom the grace's end killed
(:class:`launcher.supervisor.Supervisor`'s helpers, apart from its loop)."""

from __future__ import annotations

import signal

from .child import Child, running_groups
from .stopped_processes import StopFindings


def killed_at_the_end(
    left: list[Child], servers: list[Child], grace: float, server_seconds: float
) -> str:
    """Whom the grace's end killed, each with the time it had since its SIGTERM: a server gets
    its own only once the workers are gone, so workers that use the whole grace leave it none
    (it must not read as a shard that ignored its SIGTERM for the whole grace)."""
    said = []
    workers = [c.spec.name for c in left if c not in servers]
    if workers:
        said.append(f"{', '.join(workers)} still running {grace:g} s after SIGTERM")
    late = [c.spec.name for c in left if c in servers]
    if late:
        said.append(
            f"{', '.join(late)} still running {server_seconds:.0f} s after its SIGTERM (sent "
            "once the workers were gone, or the grace ran out)"
        )
    return ", ".join(said) + ": killed"


def first_failed(children: list[Child], working: bool, victims: bool = True) -> Child | None:
    """The child that failed first (several within one poll: by exit time), or None: a
    :meth:`Child.failed` (a non-zero exit or a signal), a server's exit while a worker runs (an
    exit 0 the supervisor then weighs: :mod:`launcher.drained_shard`);
    without ``victims``, leaving out workers that stopped because another rank failed."""
    failed = [c for c in children if c.failed() and (victims or not c.victim)]
    if working:
        failed += [c for c in children if c.spec.role == "server" and c.poll() == 0]
    return min(failed, key=lambda c: c.exited_at) if failed else None


def send_stop_signals(children: list[Child], findings: StopFindings) -> None:
    """Each child's stop signals to its group, in order (see ChildSpec.stop_signals), then
    SIGCONT, as a shell's ``kill`` does for a stopped job: a process stopped (SIGSTOP, Ctrl-Z)
    holds them pending until it runs again, and would sit out the grace until the SIGKILL.
    Which processes were stopped is noted in ``findings`` first: once continued, nothing
    says it, and the report would blame the peer that gave up on one."""
    findings.look(children)
    for child in children:
        for signum in child.spec.stop_signals:
            child.signal_group(signum)
        child.signal_group(signal.SIGCONT)


def any_running(children: list[Child]) -> bool:
    """Whether a process of any of ``children``'s groups still runs (one look at /proc)."""
    running = running_groups()
    return any(c.group_alive(running) for c in children)
