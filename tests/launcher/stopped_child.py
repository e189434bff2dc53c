"""A real ``distconv-launch local`` job one of whose children the test stops (SIGSTOP) once
training has begun, as an operator's straggler is: a worker or a shard that never exits by
itself. What the launcher then reports is the test's to check; the stopped child is let go
(SIGCONT) and every process of the job killed at the end, whatever happened."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from tests.launcher.launch_cli import ENV, launch, launcher_command
from tests.processes import job_env, job_processes

#: the line after which the child is stopped: training has begun on every rank
STARTED = "epoch 1/"


@dataclass(frozen=True)
class StoppedLaunch:
    """What a launch with a stopped child ended with: its status, its output (stdout and
    stderr together), its ``failure.json`` (None where it wrote none), and the stopped pid."""

    status: int
    output: str
    report: dict | None
    pid: int


def child_pid(env: dict[str, str], role: str, rank: int) -> int | None:
    """The pid of the job's (marked in ``env``) ``role`` ``rank``: a worker by its ``RANK``,
    a shard by its ``--shard``; None where none runs."""
    for pid, args in job_processes(env).items():
        if role == "server" and " pserver " in f"{args} " and f" --shard {rank} " in f"{args} ":
            return pid
        if role == "worker" and " train " in f"{args} " and _rank(pid) == str(rank):
            return pid
    return None


def _rank(pid: int) -> str | None:
    """The ``RANK`` in process ``pid``'s environment; None where it has none, or is gone."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    found = [entry[5:] for entry in environ if entry.startswith(b"RANK=")]
    return found[0].decode() if found else None


def launch_stopping(
    tmp_path: Path, role: str, rank: int, *argv: str, timeout: float = 90
) -> StoppedLaunch:
    """``distconv-launch local ARGV`` (``--run-dir`` ``tmp_path/run`` added before them) in
    ``tmp_path``; once a rank says :data:`STARTED`, ``role`` ``rank`` is stopped (SIGSTOP) until
    the launcher ends (``timeout`` seconds at most, past which the job is killed and the test
    fails)."""
    run = tmp_path / "run"
    with job_env(ENV) as env:
        command = [*launcher_command(), "local", "--run-dir", str(run), *argv]
        launcher = subprocess.Popen(
            command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        lines: list[str] = []
        started = threading.Event()
        reader = threading.Thread(target=_read, args=(launcher, lines, started), daemon=True)
        reader.start()
        pid = None
        try:
            assert started.wait(timeout), f"no {STARTED!r} line:\n{''.join(lines)}"
            pid = child_pid(env, role, rank)
            assert pid is not None, f"no {role} {rank} running: {job_processes(env)}"
            os.kill(pid, signal.SIGSTOP)
            status = launcher.wait(timeout)
        finally:
            if pid is not None:
                _let_go(env, pid)
            launcher.kill()
            launcher.wait()
            reader.join(10)
            launcher.stdout.close()
    report = run / "failure.json"
    found = json.loads(report.read_text()) if report.exists() else None
    return StoppedLaunch(status, "".join(lines), found, pid)


def _read(launcher: subprocess.Popen, lines: list[str], started: threading.Event) -> None:
    """``launcher``'s output into ``lines``, ``started`` set at its first :data:`STARTED`."""
    for line in launcher.stdout:
        lines.append(line)
        if STARTED in line:
            started.set()


def _let_go(env: dict[str, str], pid: int) -> None:
    """SIGCONT to ``pid``, where it is still the job's (marked in ``env``: its pid not taken
    by another process since): nothing is left stopped, whatever the test found."""
    if pid in job_processes(env):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def launch_marked(
    tmp_path: Path, source: str, workers: int, *args: str, restarts: int = 0, timeout: int = 50
) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The program ``source`` launched by ``distconv-launch local`` on ``workers`` ranks and no
    shard (``--max-restarts restarts``; killed past ``timeout`` s), given a mark file's path
    (where a rank that stops itself writes its pid) and ``args``; returns what the launch did,
    the mark and the run directory."""
    program, mark, run = tmp_path / "program.py", tmp_path / "stopped-pid", tmp_path / "run"
    program.write_text(source)
    done = launch(
        "local", "--run-dir", str(run), "--workers", str(workers), "--servers", "0",
        "--max-restarts", str(restarts), "--", str(program), str(mark), *args,
        cwd=tmp_path, timeout=timeout,
    )  # fmt: skip
    return done, mark, run
