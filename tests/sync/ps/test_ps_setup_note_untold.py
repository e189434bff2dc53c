"""A parameter-server worker whose setup fails tells the other workers through the shards, and
its error's note says they were told and stop too. Where no shard answered its failure note's
hello (a shard gone, stopped or unreachable) the note said so all the same, while the others
were told nothing and waited for the shard: the note now says they may not have been told, and
why. A real ``PServerSync``; its one shard's port held by a socket that never listens."""

from __future__ import annotations

import socket

import pytest
from ps_helpers import insecure_worker

from distconv.notes import notes_of


@pytest.mark.timeout(30)
def test_a_failure_note_no_shard_answered_says_the_others_may_not_have_been_told():
    with socket.socket() as held:  # bound, never listening: a shard that does not answer
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        worker = insecure_worker([f"127.0.0.1:{port}"], rank=1, world=2, timeout=1)
        try:
            error = ValueError("no checkpoint here")
            worker.fail_setup(error)
        finally:
            worker.close()
    (note,) = notes_of(error)
    assert note.startswith("the other ranks may not have been told of this error: "), note
    assert f"no answer to hello from pserver shard(s) 0 (127.0.0.1:{port})" in note, note
    assert "were told" not in note, note
