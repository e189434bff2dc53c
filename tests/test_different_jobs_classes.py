"""The words saying that the ranks run different jobs read as such only behind an error class
the project raises them under (``JobRefused``, MPI's ``JobMismatch``, an older shard's reply
as ``SyncError``), not behind any word: ``ValueError: retry: rank 1 and rank 0
run different jobs`` (a user's message) was the mismatch, its rank blamed on no shard and the
launcher restarting nothing; and a ``PeerFailed`` led by them (a shard's failure blaming a rank
beside one gone on the mismatch) read as the mismatch, though another rank failed."""

from __future__ import annotations

import pytest

from distconv.messages import described
from distconv.rank_endings import different_jobs_in, different_jobs_text
from distconv.sync import JobRefused
from distconv.sync.peers import PeerFailed

SAID = different_jobs_text(1, 0, "config.batch_size: 16 here, 8 there")
ASKED = "rank 1, all_equal:1: pserver 127.0.0.1:5: "


@pytest.mark.parametrize(
    "line",
    [
        described(JobRefused(f"{ASKED}{SAID}")),  # a bye's error, heard from another shard
        f"distconv.sync.errors.JobRefused: {ASKED}{SAID}",  # a traceback's last line
        f"distconv.sync.errors.SyncError: {ASKED}{SAID}",  # an older shard's, no refused field
        f"rank 1: JobMismatch: {SAID}; aborting the MPI job",  # a rank's reason
        f"distconv.sync.mpi.comm.JobMismatch: {SAID}",
    ],
)
def test_the_classes_the_words_are_raised_under_read_as_different_jobs(line):
    assert different_jobs_in([line]) == SAID


@pytest.mark.parametrize(
    "line",
    [
        f"ValueError: retry: {SAID}",
        f"AssertionError: {SAID}",
        f"RuntimeError: {ASKED}{SAID}",
        f"mypackage.JobRefused: {SAID}",  # only the project's own
        described(PeerFailed(f"{ASKED}{SAID}; ranks are at different points", [2])),
        f"distconv.sync.peers.PeerFailed: {ASKED}{SAID}; ranks are at different points",
    ],
)
def test_the_words_behind_any_other_class_are_no_mismatch(line):
    assert different_jobs_in([line]) is None, line
