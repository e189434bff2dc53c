"""A run whose first checkpoint met a full disk after its first epoch said "no checkpoint kept
yet: the same command starts afresh", but the same command is refused there (the run has an
epoch's metrics); ``--resume auto`` is what starts afresh, and the words now say so. A real
``distconv train`` whose files may not grow past 200 KiB (``RLIMIT_FSIZE``: its checkpoint's
part is larger), then the command the words name, run."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_env

#: the words, and the command they name, run below
NONE_KEPT = "no checkpoint kept yet: --resume auto starts afresh"
#: one epoch of digits is 90 steps; the first checkpoint is the epoch's end
TRAIN = ("--epochs", "2", "--checkpoint-every", "1000", "--no-progress")


def _train(out: Path, *extra: str, limit: int | None = None) -> subprocess.CompletedProcess:
    """``distconv train`` into ``out`` (files capped at ``limit`` bytes where given)."""

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-m", "distconv", "train", *TRAIN, "--out", str(out), *extra],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=100,
        preexec_fn=None if limit is None else capped,
    )


@pytest.mark.timeout(240)
def test_the_words_of_no_checkpoint_kept_name_a_command_that_starts_afresh(tmp_path):
    out = tmp_path / "out"
    failed = _train(out, limit=200 * 1024)
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert failed.stderr.rstrip().endswith(f"file too large; {NONE_KEPT}"), failed.stderr[-3000:]
    again = _train(out)  # the same command: the run has an epoch's metrics
    assert again.returncode != 0 and "already holds a run" in again.stderr, again.stderr[-3000:]
    auto = _train(out, "--resume", "auto")  # as the words say
    assert auto.returncode == 0, auto.stderr[-3000:]
