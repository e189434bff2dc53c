"""A shard reads its job id as the workers read theirs (``--job-id``, else
``DISTCONV_JOB_ID``, else ``local``, stripped): it kept ``' job7 '`` padded while the workers
stripped theirs, so every hello was refused. A blank id stops it at start."""

from __future__ import annotations

import subprocess
import sys

import pytest
from ps_helpers import insecure_worker, small_net

from tests.child_env import child_path


@pytest.mark.timeout(60)
def test_a_padded_job_id_is_the_workers_job_id(shards):
    endpoints = shards.start(1, workers=1, extra=["--job-id", " job7 "])
    sync = insecure_worker(endpoints, job_id="job7")
    try:
        sync.setup(small_net().parameters())  # refused: "another job" before the fix
    finally:
        sync.close()


def _pserver(*extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``distconv pserver`` of one shard on 127.0.0.1 port 0, with ``extra`` flags and ``env``
    beside PYTHONPATH."""
    return subprocess.run(
        [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0", "--shard", "0"]
        + ["--num-shards", "1", "--workers", "1", "--insecure", *extra],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": child_path(), **(env or {})},
    )


@pytest.mark.timeout(60)
def test_a_blank_job_id_stops_the_shard_with_one_line():
    done = _pserver("--job-id", "  ")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    # as given, both spaces (the error line made them one), and its length
    said = "--job-id: job id must be a non-empty word, got '  ' (only whitespace, 2 characters)"
    assert len(lines) == 1 and lines[0].endswith(said), lines
    assert "--job-id: --job-id" not in lines[0]


@pytest.mark.timeout(60)
def test_a_bad_job_id_from_the_environment_is_blamed_on_the_variable():
    """``--job-id``'s default was ``$DISTCONV_JOB_ID``, so the shard read the variable's value
    as the flag's and said ``--job-id: ...`` of a flag nobody gave."""
    done = _pserver(env={"DISTCONV_JOB_ID": "a b"})
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    said = "DISTCONV_JOB_ID: job id must be a non-empty word, got 'a b'"
    assert len(lines) == 1 and lines[0].endswith(said), lines
    assert "--job-id" not in lines[0]
