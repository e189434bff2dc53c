"""A failure note's neighbours on a real shard (review k636): the process of a rank whose
last fit failed before setup ends without failing the job (item 1)."""

from __future__ import annotations

import pytest
from test_ps_processes import HOST, LONG, _kill, _two_looks, identity_of, sleeper  # noqa: F401, F811

from distconv.sync.errors import setup_failure_description
from distconv.sync.ps.job_hello import hello_fields

pytestmark = pytest.mark.timeout(60)


def _note(rank: int) -> dict:
    """Rank ``rank``'s failure note, as ``fail_setup`` sends it."""
    return hello_fields(setup_failure_description(rank, "ValueError: an empty set"))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_process_ending_after_its_note_fails_nothing(hand, sleeper, mode):  # noqa: F811
    """Each rank's process trains a fit, then its script's last fit fails before setup (a
    note and a bye of the same run) and the process exits: that end is no crash (sync) nor
    a loss (async): the job stays healthy."""
    h = hand(workers=2, mode=mode, timeout=LONG)
    workers = [sleeper(), sleeper()]
    for rank, w in enumerate(workers):
        head = {"op": "hello", "rank": rank, "host": HOST, "run": rank}
        assert h.ask({**head, **hello_fields({}), "process": identity_of(w.pid)})[0]["op"] == "ok"
    for rank, w in enumerate(workers):
        head = {"op": "hello", "rank": rank, "host": HOST, "run": rank}
        said = h.ask({**head, **_note(rank), "process": identity_of(w.pid)})[0]
        assert "could not set up" in said["error"]
        bye = {"op": "bye", "rank": rank, "run": rank, "error": "ValueError: an empty set"}
        assert h.ask(bye)[0]["op"] == "ok"
    for w in workers:
        _kill(w)
    _two_looks(h)
    assert (h.shard.failed, h.shard.lost) == (None, set())
