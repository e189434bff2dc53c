"""A shard sees a worker process on its own host end (SIGKILL, the OOM killer), and loses its
rank at once instead of after ``--timeout``: the process watch on real child processes, then
the shard's rules on a shard fed by hand (sync fails the job naming the rank; async with
``continue`` goes on without it; a rank that said bye, or runs elsewhere, is not watched)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq

from distconv.procfs import process_identity
from distconv.sync.base import SyncError
from distconv.sync.ps.config import hostname
from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.processes import LOOK_EVERY, ProcessWatch, whoami
from distconv.sync.ps.wire import pack

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="needs Linux's /proc"),
]

LONG = 3600.0  # a --timeout no test waits out
HOST = hostname()  # the name a worker on this host sends in its hello


@pytest.fixture
def sleeper():
    """Starts child processes that sleep until killed; kills what is left after the test."""
    made: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        made.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
        return made[-1]

    yield start
    for p in made:
        p.kill()
        p.wait()


def identity_of(pid: int) -> str:
    """What the process ``pid`` would send as its ``process`` (this process's boot and
    namespace: a child shares them)."""
    boot, ns, _, _ = process_identity().split(" ")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return f"{boot} {ns} {pid} {fields[19]}"


#: a clock for the watch that moves past its rate limit between any two looks
CLOCK = itertools.count(start=10.0, step=2 * LOOK_EVERY)


def _ended(watch: ProcessWatch, ranks) -> list[int]:
    """The ranks ``watch`` names at its next two looks (a process found ended at one look is
    named at the next)."""
    return [rank for _ in range(2) for rank, _ in watch.ended(ranks, next(CLOCK))]


def _until_zombie(pid: int) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child never became a zombie"
        time.sleep(0.01)


# -- the watch --------------------------------------------------------------------------------
def test_this_process_names_its_boot_namespace_pid_and_start():
    boot, ns, pid, start = process_identity().split(" ")
    assert boot == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert ns == os.readlink("/proc/self/ns/pid") and int(pid) == os.getpid()
    assert start.isdigit() and identity_of(os.getpid()) == process_identity()
    assert whoami()["process"] == process_identity() and whoami()["host"]


def test_a_killed_process_is_named_once_as_a_zombie_and_once_reaped(sleeper):
    a, b = sleeper(), sleeper()
    watch = ProcessWatch()
    watch.track(0, identity_of(a.pid), HOST)
    watch.track(1, identity_of(b.pid), HOST)
    assert _ended(watch, [0, 1]) == []  # both alive
    a.send_signal(signal.SIGKILL)
    _until_zombie(a.pid)  # not yet reaped by its parent: it has ended all the same
    assert list(watch.ended([0, 1], next(CLOCK))) == []  # found ended: named at the next look
    ended = list(watch.ended([0, 1], next(CLOCK)))
    assert ended == [(0, a.pid)]
    b.kill()
    b.wait()  # reaped: no /proc entry at all
    assert _ended(watch, [0, 1]) == [1]
    assert _ended(watch, [0, 1]) == []  # each named once


def test_only_the_ranks_asked_about_are_looked_at(sleeper):
    """The shard asks about live ranks that have not said bye: a rank that closed and then
    exited is no loss."""
    a = sleeper()
    watch = ProcessWatch()
    watch.track(3, identity_of(a.pid), HOST)
    a.kill()
    a.wait()
    assert _ended(watch, [0, 1]) == []
    assert _ended(watch, [3]) == [3]


def test_looks_come_at_most_every_look_every_seconds(sleeper):
    a = sleeper()
    watch = ProcessWatch()
    watch.track(0, identity_of(a.pid), HOST)
    now = time.monotonic() + 10
    assert list(watch.ended([0], now)) == []  # a look: alive
    a.kill()
    a.wait()
    assert list(watch.ended([0], now + LOOK_EVERY / 2)) == []  # too soon for another look
    assert list(watch.ended([0], now + LOOK_EVERY)) == []  # found ended ...
    assert list(watch.ended([0], now + 1.5 * LOOK_EVERY)) == []  # (too soon again)
    assert [r for r, _ in watch.ended([0], now + 2 * LOOK_EVERY)] == [0]  # ... named


@pytest.mark.parametrize(
    "change",
    [
        lambda boot, ns, pid, start: f"{'0' * len(boot)} {ns} {pid} {start}",  # another boot
        lambda boot, ns, pid, start: f"{boot} pid:[1] {pid} {start}",  # another namespace
        lambda boot, ns, pid, start: f"{boot} {ns} {pid} {int(start) + 1}",  # pid reused
        lambda boot, ns, pid, start: f"{boot} {ns} x{pid} {start}",  # malformed
        lambda boot, ns, pid, start: f"{boot} {ns} \u00b2 {start}",  # a digit int() refuses
        lambda boot, ns, pid, start: f"{boot} {ns} {'9' * 5000} {start}",  # past int()'s limit
        lambda boot, ns, pid, start: "",  # none sent (not Linux)
    ],
    ids=["boot", "namespace", "start", "malformed", "superscript", "huge", "empty"],
)
def test_a_process_the_shard_cannot_be_sure_of_is_not_watched(sleeper, change):
    """Another host, container or OS, or a pid that is some other process now: the process in
    this shard's /proc is not the worker's, and its end would say nothing of the rank."""
    a = sleeper()
    watch = ProcessWatch()
    watch.track(0, change(*identity_of(a.pid).split(" ")), HOST)
    a.kill()
    a.wait()
    assert _ended(watch, [0]) == []


def test_a_proc_of_another_pid_namespace_names_no_process(sleeper, monkeypatch):
    """Under ``unshare --pid`` without ``--mount-proc``, ``/proc`` is the parent namespace's:
    ``/proc/<our pid>`` is another process (here: this one's parent stands in for it), whose
    end would fail a healthy job. Nothing is named, nor followed, there."""
    a = sleeper()
    identity = identity_of(a.pid)
    monkeypatch.setattr(os, "getpid", os.getppid)  # /proc/self is no longer "our" pid
    assert process_identity() == ""
    watch = ProcessWatch()
    watch.track(0, identity, HOST)
    a.kill()
    a.wait()
    assert _ended(watch, [0]) == []


def test_a_stat_that_cannot_be_read_is_no_news(sleeper, monkeypatch):
    """Out of file descriptors (EMFILE), or hidepid: the process may well run on; only its
    absence says it ended."""
    import errno

    from distconv import procfs

    a = sleeper()
    watch = ProcessWatch()
    watch.track(0, identity_of(a.pid), HOST)
    real = procfs.Path

    class Exhausted(type(real())):
        def read_text(self, *args, **kwargs):
            if str(self).endswith(f"/{a.pid}/stat"):
                raise OSError(errno.EMFILE, "Too many open files")
            return super().read_text(*args, **kwargs)

    monkeypatch.setattr(procfs, "Path", Exhausted)
    assert _ended(watch, [0]) == []  # alive, but unreadable: not named
    monkeypatch.setattr(procfs, "Path", real)
    a.kill()
    a.wait()
    assert _ended(watch, [0]) == [0]  # still followed: its end is seen


def test_a_process_hidden_after_it_was_tracked_is_no_news(sleeper, monkeypatch):
    """``/proc`` stops showing a tracked worker (remounted ``hidepid=2`` with the worker
    another user's): its missing entry was taken for its end, and a running rank was lost,
    failing a sync job (the launcher watch had the same fault). ``kill(pid, 0)``
    says it is there; once it is gone, its end is seen."""
    from distconv import procfs

    a = sleeper()
    watch = ProcessWatch()
    watch.track(0, identity_of(a.pid), HOST)
    real = procfs.Path

    class Hidden(type(real())):
        def read_text(self, *args, **kwargs):
            if str(self).endswith(f"/{a.pid}/stat"):  # as hidepid=2 answers another user
                raise FileNotFoundError(2, "No such file or directory")
            return super().read_text(*args, **kwargs)

    monkeypatch.setattr(procfs, "Path", Hidden)
    assert _ended(watch, [0]) == []  # alive, hidden: not named
    a.kill()
    a.wait()
    assert _ended(watch, [0]) == [0]  # hidden still, but gone: named


def test_a_worker_of_another_host_name_is_not_watched(sleeper):
    """VMs cloned from one snapshot share a boot id and the first PID namespace's id."""
    a = sleeper()
    watch = ProcessWatch()
    watch.track(0, identity_of(a.pid), HOST + "-clone")
    a.kill()
    a.wait()
    assert _ended(watch, [0]) == []


def test_a_new_hello_from_elsewhere_stops_the_watch(sleeper):
    a = sleeper()
    watch = ProcessWatch()
    watch.track(0, identity_of(a.pid), HOST)
    watch.track(0, "", "elsewhere")  # the rank restarted on another host
    a.kill()
    a.wait()
    assert _ended(watch, [0]) == []


# -- on a shard fed by hand -----------------------------------------------------------------
def _two_looks(h) -> None:
    """Two looks of ``h``'s shard at its workers' processes, far enough apart."""
    now = time.monotonic() + 2 * LOOK_EVERY
    for later in (0, 2 * LOOK_EVERY):
        h.shard._check_timeouts(now + later)


def _hello(h, rank: int, pid: int) -> None:
    head = {"op": "hello", "rank": rank, "host": HOST, **hello_fields({}), "run": rank}
    assert h.ask({**head, "process": identity_of(pid)})[0]["op"] == "ok"


def _kill(p: subprocess.Popen) -> None:
    p.kill()
    p.wait()


def test_sync_a_killed_worker_fails_the_job_at_once_naming_it(hand, sleeper):
    h = hand(workers=2, mode="sync", timeout=LONG)
    workers = [sleeper(), sleeper()]
    for rank, w in enumerate(workers):
        _hello(h, rank, w.pid)
    h.send({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None})
    _kill(workers[1])
    _two_looks(h)
    why = (
        f"rank 1 (host {HOST}, no step since its hello): its process (pid "
        f"{workers[1].pid}, on this host) "
        "ended without a bye"
    )
    assert h.shard.failed.startswith(why) and h.shard.failed_ranks == [1]
    reply = h.read()[0]  # the gather rank 0 waits in ends, naming the cause
    assert reply["op"] == "error" and reply["error"].startswith(why)
    assert reply["failed_ranks"] == [1]


def test_async_continue_goes_on_without_a_killed_worker(hand, sleeper):
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=LONG)
    workers = [sleeper() for _ in range(3)]
    for rank, w in enumerate(workers):
        _hello(h, rank, w.pid)
    for rank in (0, 2):
        h.send({"op": "gather", "rank": rank, "tag": "barrier:2", "value": [rank]})
    _kill(workers[1])
    _two_looks(h)
    assert h.shard.lost == {1} and not h.shard.failed
    assert [h.read()[0]["values"] for _ in range(2)] == [[[0], None, [2]]] * 2


def test_a_worker_that_said_bye_is_no_loss_when_its_process_ends(hand, sleeper):
    h = hand(workers=2, mode="sync", timeout=LONG)
    workers = [sleeper(), sleeper()]
    for rank, w in enumerate(workers):
        _hello(h, rank, w.pid)
    assert h.ask({"op": "bye", "rank": 1, "run": 1})[0]["op"] == "ok"
    _kill(workers[1])
    _two_looks(h)
    assert not h.shard.failed


def test_a_bye_read_after_the_process_ended_is_no_loss(hand, sleeper):
    """A worker says bye without waiting for the reply and exits: the shard, busy, may find
    its process gone before it reads the bye (queued behind other workers' requests). A
    healthy sync job failed at its end that way ("killed ... or crashed")."""
    h = hand(workers=2, mode="sync", timeout=LONG)
    workers = [sleeper(), sleeper()]
    for rank, w in enumerate(workers):
        _hello(h, rank, w.pid)
    _kill(workers[1])  # its bye was sent, and waits in the queue
    now = time.monotonic() + 2 * LOOK_EVERY
    h.shard._check_timeouts(now)  # a look before the bye is read
    assert not h.shard.failed
    assert h.ask({"op": "bye", "rank": 1, "run": 1})[0]["op"] == "ok"
    h.shard._check_timeouts(now + 2 * LOOK_EVERY)
    assert not h.shard.failed


def test_a_bye_still_queued_at_the_look_is_read_first(hand, sleeper):
    """The shard reads what is queued before it looks: a bye waiting there (the shard busy
    with others' requests while the worker exited) says the rank closed."""
    h = hand(workers=2, mode="sync", timeout=LONG)
    workers = [sleeper(), sleeper()]
    for rank, w in enumerate(workers):
        _hello(h, rank, w.pid)
    h.client.send_multipart(pack({"op": "bye", "id": 99, "job": "local", "rank": 1, "run": 1}))
    _kill(workers[1])
    assert h.shard._sock.poll(5000), "the bye never reached the shard's queue"
    _two_looks(h)
    assert not h.shard.failed and 1 in h.shard.left


# -- a worker beside a shard ----------------------------------------------------------------
def test_a_worker_waiting_on_a_killed_shard_stops_at_once_naming_it(shards):
    """Worker 0 of 2 waits for worker 1 (never started) in the start-up gather when its shard,
    on this host, is killed: the wait ends within seconds, naming the shard's process, where it
    waited for its own timeout (1.5 times 600 s here) or a launcher's stop."""
    from ps_helpers import insecure_worker, small_net

    endpoints = shards.start(1, workers=2, extra=["--timeout", "600"])
    shard = shards.procs[0]
    net, sync = small_net(), insecure_worker(endpoints, 0, 2, timeout=600)
    killer = threading.Timer(1.0, shard.kill)
    killer.start()
    began = time.monotonic()
    try:
        with pytest.raises(SyncError, match=rf"pserver shard 0 \({endpoints[0]}\) is gone: its "
                           rf"process \(pid {shard.pid}, on this host\) ended"):  # fmt: skip
            sync.setup(net.parameters(), {})
    finally:
        killer.cancel()
        sync.close()
    assert time.monotonic() - began < 10


class _NeverEmpty:
    """The shard's socket with a queue that never empties (workers whose requests come as fast
    as the shard handles them: an async shard that is the job's bottleneck)."""

    def __init__(self, sock) -> None:
        self._real = sock
        self.began = time.monotonic()

    def poll(self, timeout=None, flags=None):
        assert time.monotonic() - self.began < 10, "the shard never got past reading its queue"
        return 1  # a request is there ...

    def recv_multipart(self, *args, **kwargs):
        assert time.monotonic() - self.began < 10, "the shard never got past reading its queue"
        if self._real.poll(0):
            return self._real.recv_multipart(*args, **kwargs)
        return [zmq.Frame(part) for part in _STATS]  # another worker's, just in

    def __getattr__(self, name):
        return getattr(self._real, name)


_STATS = [b"worker", pack({"op": "stats", "id": 1, "job": "local", "rank": 0})[0]]


def test_a_queue_that_never_empties_does_not_keep_the_look_and_the_timeouts_away(hand, monkeypatch):
    """Reading what is queued before a look is bounded in time: a shard whose queue never
    emptied read it for ever, and never again checked its timeouts, its stop or its probe."""
    h = hand(workers=2, mode="sync", timeout=1)
    head = {"op": "hello", "rank": 0, "host": HOST, **hello_fields({}), "run": 0}
    assert h.ask({**head, "process": process_identity()})[0]["op"] == "ok"
    h.send({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None})
    monkeypatch.setattr(h.shard, "_sock", _NeverEmpty(h.shard._sock))
    h.shard._check_timeouts(time.monotonic() + 5)  # rank 1 sent nothing within the timeout
    assert h.shard.failed and "rank 1" in h.shard.failed


def test_a_rank_that_said_bye_is_no_longer_watched(hand, sleeper):
    """Nothing is left to look at once every watched rank closed: no more reads before looks."""
    h = hand(workers=1, mode="sync", timeout=LONG)
    _hello(h, 0, sleeper().pid)
    assert h.shard.processes.look_due(time.monotonic() + 2 * LOOK_EVERY)
    assert h.ask({"op": "bye", "rank": 0, "run": 0})[0]["op"] == "ok"
    assert not h.shard.processes.look_due(time.monotonic() + 2 * LOOK_EVERY)


def test_a_process_whose_stat_cannot_be_read_at_hello_is_not_watched(sleeper, monkeypatch):
    import errno

    from distconv import procfs

    a = sleeper()
    identity = identity_of(a.pid)
    real = procfs.stat_fields

    def unreadable(pid):
        if pid == a.pid:
            raise OSError(errno.EACCES, "Permission denied")
        return real(pid)

    monkeypatch.setattr(procfs, "stat_fields", unreadable)
    watch = ProcessWatch()
    watch.track(0, identity, HOST)
    monkeypatch.setattr(procfs, "stat_fields", real)
    a.kill()
    a.wait()
    assert _ended(watch, [0]) == []


def test_a_loop_turn_reads_one_batch_and_the_read_before_a_look_reads_on_until_its_time(
    hand, monkeypatch
):
    """The loop's own read stops at BATCH requests, whatever is queued; the read before a look
    goes on past it until its time is up, and no longer."""
    from distconv.sync.ps import losses
    from distconv.sync.ps.server import BATCH

    h = hand(workers=1, mode="sync", timeout=LONG)
    _hello_run(h, 0, os.getpid(), 0)  # watched: a look is due
    monkeypatch.setattr(h.shard, "_sock", _NeverEmpty(h.shard._sock))
    before = h.shard.requests
    h.shard._drain()
    assert h.shard.requests - before == BATCH
    monkeypatch.setattr(losses, "READ_BEFORE_LOOK", 0.3)
    before, began = h.shard.requests, time.monotonic()
    h.shard._check_timeouts(began)
    took = time.monotonic() - began
    assert 0.3 <= took < 5 and h.shard.requests - before > BATCH
    # the look took the time after the read: the next one is LOOK_EVERY after it
    assert h.shard.processes._next_look >= began + 0.3 + LOOK_EVERY


def _hello_run(h, rank: int, pid: int, run: int) -> None:
    head = {"op": "hello", "rank": rank, "host": HOST, **hello_fields({}), "run": run}
    assert h.ask({**head, "process": identity_of(pid)})[0]["op"] == "ok"


def test_a_second_hello_after_bye_is_watched_again(hand, sleeper):
    """The same worker sets up again after its bye (a second setup): its process is followed
    again, and its kill fails the job."""
    h = hand(workers=2, mode="sync", timeout=LONG)
    workers = [sleeper(), sleeper()]
    for rank, w in enumerate(workers):
        _hello_run(h, rank, w.pid, rank)
    assert h.ask({"op": "bye", "rank": 1, "run": 1})[0]["op"] == "ok"
    _hello_run(h, 1, workers[1].pid, 1)
    _kill(workers[1])
    _two_looks(h)
    assert h.shard.failed and h.shard.failed_ranks == [1]


def test_a_bye_of_an_earlier_run_leaves_the_latest_worker_watched(hand, sleeper):
    """A rank restarted (a new run) while its earlier worker still ran: that worker's bye is
    ignored, and the new one's kill still fails the job."""
    h = hand(workers=2, mode="sync", timeout=LONG)
    workers = [sleeper(), sleeper(), sleeper()]
    _hello_run(h, 0, workers[0].pid, 0)
    _hello_run(h, 1, workers[1].pid, 1)
    _hello_run(h, 1, workers[2].pid, 7)  # rank 1 again, a new run
    assert h.ask({"op": "bye", "rank": 1, "run": 1})[0]["op"] == "ok"  # the earlier run's
    _kill(workers[2])
    _two_looks(h)
    assert h.shard.failed and h.shard.failed_ranks == [1]


def test_a_lost_rank_is_no_longer_watched(hand, sleeper):
    """Async, continue: once its only watched rank is lost, the shard has nothing to look at
    (no read before a look any more)."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1)
    _hello_run(h, 1, sleeper().pid, 1)
    h.shard.last_seen[1] -= 10  # silent past the timeout
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.lost == {1} and not h.shard.failed
    assert not h.shard.processes.look_due(time.monotonic() + 2 * LOOK_EVERY)


def test_sync_a_killed_worker_beside_a_rank_gone_on_another_job_leads_with_the_refusal(
    hand, sleeper
):
    """Rank 1 left on the ranks' different jobs (its hello refused, then its bye) while rank
    0 waits in the start-up gather; then rank 2's process ends. The failure named rank 2's
    end alone, which the launcher read as rank 2's failure (a restart, that stops on the
    mismatch again): it now leads with the mismatch and ``refused: job``, as the gather's
    timeout does (gathers._refusal), rank 2 still named and blamed."""
    h = hand(workers=3, mode="sync", timeout=LONG)
    workers = [sleeper() for _ in range(3)]
    _hello(h, 2, workers[2].pid)  # its job is the job
    head = {"op": "hello", "rank": 1, "host": HOST, **hello_fields({"batch": 9}), "run": 1}
    refused = h.ask({**head, "process": identity_of(workers[1].pid)})[0]
    assert refused.get("refused") == "job", refused
    bye = {"op": "bye", "rank": 1, "run": 1, "error": f"JobRefused: {refused['error']}"}
    assert h.ask(bye)[0]["op"] == "ok"
    _hello(h, 0, workers[0].pid)
    h.send({"op": "gather", "rank": 0, "tag": "all_equal:1", "value": None})
    assert not h.shard.failed
    _kill(workers[2])
    _two_looks(h)
    reply = h.read()[0]  # the gather rank 0 waits in ends, led by the mismatch
    assert reply["op"] == "error" and reply["error"].startswith(
        "rank 1 and rank 2 run different jobs: batch: "
    ), reply
    ended = f"rank 2 (host {HOST}, no step since its hello): its process (pid {workers[2].pid}, on "
    assert f"; {ended}" in reply["error"], reply
    assert reply["failed_ranks"] == [2] and reply["refused"] == "job", reply
