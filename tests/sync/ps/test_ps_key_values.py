"""A key file whose key is no CURVE key (edited, cut short) is named as such, at start, on
either side: a shard's secret key stopped it with ZeroMQ's bare ``ZMQError: Invalid
argument`` traceback, and a worker's public key, admitted by nothing, let the shard start and
refuse that worker's every connection."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from ps_helpers import run_pserver

from distconv.sync.ps.keys import KeyFileError, worker_keys


def _pserver(keys: Path) -> subprocess.CompletedProcess:
    return run_pserver("--keys", str(keys), "--workers", "2", "--drain-seconds", "0", timeout=30)


def _edit(keys: Path, name: str, kind: str, value: str) -> Path:
    """``keys``' file ``name`` with its ``kind`` (public, secret) key replaced by ``value``."""
    path = keys / name
    text = re.sub(rf'{kind}-key = ".*"', f'{kind}-key = "{value}"', path.read_text())
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "kind", "value"),
    [
        ("server.key_secret", "secret", "cut short"),  # 9 characters
        ("server.key_secret", "secret", "#" * 40),  # 40, each group past 2**32
        ("worker-1.key", "public", "~" * 40),  # 40, none of them Z85
    ],
)
def test_a_shard_with_a_key_that_is_no_curve_key_stops_naming_the_file(
    job_keys, tmp_path, name, kind, value
):
    keys = Path(shutil.copytree(job_keys, tmp_path / "keys"))
    path = _edit(keys, name, kind, value)
    try:
        proc = _pserver(keys)
    except subprocess.TimeoutExpired:  # it started, serving with the key
        pytest.fail(f"the shard started with {path}")
    assert proc.returncode == 1, proc
    assert proc.stderr.strip() == (
        f"distconv pserver: error: CURVE key file {path}: its {kind} key is not a CURVE key "
        "(40 Z85 characters; a file edited or cut short? copy it again from the job's key set "
        "(made once with `distconv keys`))"
    ), proc.stderr


def test_a_worker_secret_that_is_no_curve_key_is_named(job_keys, tmp_path):
    keys = Path(shutil.copytree(job_keys, tmp_path / "keys"))
    path = _edit(keys, "worker-0.key_secret", "secret", "x" * 5)
    with pytest.raises(KeyFileError, match=f"^CURVE key file {path}: its secret key is not"):
        worker_keys(keys, 0)
    worker_keys(keys, 1)  # the untouched ones read as before
