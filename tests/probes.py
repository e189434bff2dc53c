"""What a test reads off running processes and this host: a ``distconv train`` process's
health port, the port a process started on port 0 bound, what a process's ``/metrics``
serves, which processes name a run directory, whether IPv6 works here; a port the test holds;
and a program run with its process group, so that none of its children outlives the test."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

#: the line a ``distconv train`` rank logs once its probes are bound (``distconv.job.SERVING``)
WORKER_PROBES = re.compile(r"probes and metrics on port (\d+)")
#: the line a ``distconv pserver --health-port`` prints once its probes are bound
SHARD_PROBES = re.compile(r"pserver shard \d+ probes on 127\.0\.0\.1:(\d+)")
SAMPLES = re.compile(rb"^distconv_samples_total\{[^}]*\} ([0-9.e+]+)", re.MULTILINE)


def trained_samples(port: int) -> float:
    """Examples the worker has trained, from /metrics; -1 while it does not answer yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            found = SAMPLES.search(reply.read())
    except OSError:
        return -1
    return float(found.group(1)) if found else -1


def metric_families(port: int) -> dict[str, Metric]:
    """The families ``/metrics`` on ``port`` serves, by name, read with prometheus_client's
    parser (a counter's name without its ``_total``; its ``_created`` a family of its own)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def shard_probe_port(log_text: str, shard: int = 0) -> int:
    """The port of a ``distconv pserver --health-port 0``'s probes on 127.0.0.1, as its stderr
    (``log_text``) names it."""
    found = re.search(rf"pserver shard {shard} probes on 127\.0\.0\.1:(\d+)", log_text)
    assert found, log_text
    return int(found.group(1))


def bound_port(
    output: Path | IO[str], said: re.Pattern[str], proc: subprocess.Popen, limit: float = 60
) -> int:
    """The port a process started on port 0 (``--health-port 0``) bound, as the first line of
    its ``output`` that ``said`` matches names it (group 1), once the process has said it.

    A port only found free and handed to the process could be taken by another program in
    between (``Address already in use``), or answered by it: the kernel's own choice is named
    in the process's line alone. ``output`` is a log file the process (or its launcher)
    writes, read as it grows, or a pipe of it: a pipe is read a byte at a time up to the end
    of that line only, so whatever follows is still there for ``communicate()``.

    Raises:
        AssertionError: ``proc`` ended, or ``limit`` seconds passed, before the line; with
            what it had said.
    """
    deadline = time.monotonic() + limit
    if isinstance(output, Path):
        lines = _file_lines(output, proc, deadline)
    else:
        lines = _pipe_lines(output, deadline)
    read: list[str] = []
    for line in lines:
        read.append(line)
        if found := said.search(line):
            return int(found.group(1))
    # the pipe's end, or the process's: it ended (maybe not reaped yet) before the limit
    state = f"ran {limit:g} s" if time.monotonic() > deadline else "ended"
    tail = "".join(read)[-3000:]
    raise AssertionError(f"the process {state} without the line {said.pattern!r}: {tail}")


def _file_lines(log: Path, proc: subprocess.Popen, deadline: float) -> Iterator[str]:
    """The lines of the file ``log`` as they are written, until ``proc`` has ended (its last
    words read too) or ``deadline`` (``time.monotonic()``) passes."""
    done = 0
    while True:
        ended = proc.poll() is not None  # before the read: what it wrote last is read after
        text = log.read_text(errors="replace") if log.exists() else ""
        lines = text[done:].splitlines(keepends=True)
        whole = lines if ended else [line for line in lines if line.endswith("\n")]
        done += sum(map(len, whole))
        yield from whole
        if ended or time.monotonic() > deadline:
            return
        time.sleep(0.02)


def _pipe_lines(pipe: IO[str], deadline: float) -> Iterator[str]:
    """The lines of the pipe ``pipe`` as they come, read from its descriptor a byte at a time
    (nothing past a line is taken from the pipe, or left in ``pipe``'s own buffer), until it
    ends or ``deadline`` (``time.monotonic()``) passes."""
    line = b""
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([pipe.fileno()], [], [], left)[0]:
            break
        byte = os.read(pipe.fileno(), 1)
        line += byte
        if byte in (b"\n", b""):
            if line:
                yield line.decode(errors="replace")
            if not byte:  # every writer closed it
                return
            line = b""


@contextlib.contextmanager
def held_port(*, shared: bool = False, host: str = "127.0.0.1") -> Iterator[int]:
    """A TCP port on ``host`` this test holds bound, never listening, for the ``with``: a
    connection to it is refused, and the kernel hands it to no other socket, as it would a
    port found free and let go. Not ``shared``, nothing else can bind it. ``shared``
    (``SO_REUSEADDR``): a process that names it and sets ``SO_REUSEADDR`` too, as the probes'
    HTTP server does, can bind it and listen; for a test that must know the port before the
    process binds it (a port 0 is known only after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        if shared:
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind((host, 0))
        yield held.getsockname()[1]


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


def has_ipv6_loopback() -> bool:
    """Whether this host can bind ``::1`` (some CI containers have IPv6 off)."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def run_as_group(
    argv: list[str], timeout: float, **popen: Any
) -> tuple[subprocess.Popen, str, str]:
    """Run ``argv`` in a session of its own and return the ended process (its
    ``returncode``; its ``pid`` names its process group), stdout and stderr; at the timeout,
    or any error, the whole group is SIGKILLed (a benchmark's children with it), so nothing
    outlives the test."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **popen,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc, out, err
