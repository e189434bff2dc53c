"""The way out of a process a debugger holds: raising ``--timeout`` helps ``distconv train``,
whose shards take it too, but a program of one's own raises its sync's ``timeout=`` alone,
while the shards the launcher starts for it keep their 60 s. The words said so as a way out
that does not work ("though the shards ... still wait their 60 s"); they now say what to do
there: detach within those 60 s."""

from __future__ import annotations

from launcher.stopped_processes import STOPPED_BY, stopped_way_out


def test_a_programs_own_way_out_says_to_detach_within_its_shards_60_s():
    said = stopped_way_out(STOPPED_BY["t"])
    assert "distconv train's, which its shards take too" in said, said
    assert "keep their 60 s: detach within that" in said, said


def test_a_sigstopped_process_is_told_to_go_on_not_to_raise_a_timeout():
    said = stopped_way_out(STOPPED_BY["T"])
    assert "kill -CONT PID" in said and "--timeout" not in said, said
