"""What a test reads off running processes and this host: a ``distconv train`` process's
health port, what a process's ``/metrics`` serves, which processes name a run directory,
whether IPv6 works here; and a program run with its process group, so that none of its
children outlives the test."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

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
