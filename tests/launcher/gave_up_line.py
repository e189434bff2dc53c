"""A worker's last line giving up on its shard, as a program of one's own with a short sync
timeout ends on it: what the launcher reads back (:func:`distconv.straggler_words.gave_up_in`)
to lay the wait on a process its stop found stopped. One text for every test that has a stand-in
rank say it (not imported from the code: a test of the words must not take them from it)."""

from __future__ import annotations

#: a worker's words giving up on its shard, as a program of one's own ends on them
GAVE_UP = (
    "rank 0: no answer to step 2 from pserver shard(s) 0 (127.0.0.1:5) within 1.5 s (1.5 x "
    "--timeout 1 s) (shard(s) 0 wait up to 60 s for every worker, ...)"
)
