"""A long line's cut (:func:`launcher.kept_line.kept_line`) never falls inside a JSON string's
escape: under ``--log-format json`` a rank's reason is a JSON object, and a reason over 64 KiB
whose message escapes characters (``é`` as ``\\u00e9``, a quote, a backslash) was cut inside
an escape often enough, which left the object unreadable and the reason out of the cause."""

from __future__ import annotations

import json
import time

import pytest

from distconv.logs import json_entry
from launcher.kept_line import KEPT_LINE_BYTES, kept_line
from launcher.rank_reason import rank_reason


def _reason_line(fill: str, pad: int) -> bytes:
    """A rank's reason line as ``--log-format json`` writes it, its message long."""
    message = f"rank 1: SyncError: step 3 differs {'y' * pad}{fill * 100_000}; aborting the MPI job"
    entry = json_entry(
        message,
        created=0.0,
        level="error",
        logger="distconv",
        role="worker",
        rank=1,
        world_size=2,
        job_id=None,
        restart=0,
    )
    return b"[1] " + json.dumps(entry, separators=(",", ":")).encode() + b"\n"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pad", range(6))
@pytest.mark.parametrize("fill", ["é", '"', "a\\", "\\\\"], ids=["u-escape", "quote", "bs", "bs2"])
def test_a_long_json_reason_is_still_read_from_its_kept_form(fill, pad):
    kept = kept_line(_reason_line(fill, pad))
    assert len(kept.encode()) < KEPT_LINE_BYTES + 40
    said = rank_reason([kept])
    assert said is not None and said[0] == 1, kept[-200:]
    assert said[1].startswith("SyncError: step 3 differs") and "bytes cut ...]" in said[1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pad", range(12))
def test_a_cut_never_splits_a_surrogate_pair(pad):
    """A character past U+FFFF (an emoji) is two escapes, ``\\ud83d\\ude00``: a cut between
    them left the kept reason's message a lone surrogate, which no UTF-8 output can encode
    (the launcher's ``say`` raised UnicodeEncodeError writing the cause)."""
    kept = kept_line(_reason_line("\U0001f600", pad))
    assert len(kept.encode()) < KEPT_LINE_BYTES + 40
    said = rank_reason([kept])
    assert said is not None and said[0] == 1, kept[-200:]
    said[1].encode()  # no lone surrogate at either end of the cut
    assert said[1].endswith("\U0001f600") and "bytes cut ...]" in said[1]


@pytest.mark.timeout(60)
def test_a_long_run_of_backslashes_is_cut_in_time():
    """Whether a backslash escapes hangs on the length of its run, which a line can make all
    of it: that was counted a byte at a time in Python, over a second for each 20 MB (the pump
    reads no pipe meanwhile); it is counted in pieces by ``bytes.rstrip`` now. The bound is
    on this thread's CPU time (about 0.5 s; 11.5 s the old way), which other processes on the
    cores (the suite's other xdist worker) do not stretch as they stretch the wall clock."""
    line = b"[1] " + b"\\" * (128 * 1024 * 1024) + b"\n"
    started = time.thread_time()
    kept = kept_line(line)
    assert time.thread_time() - started < 2.0
    assert kept.startswith("[1] \\") and kept.endswith("\\") and "bytes cut ...]" in kept
