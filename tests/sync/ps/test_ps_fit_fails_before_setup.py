"""A parameter-server worker whose fit fails before its sync's setup (rank 0's ``resume=True``
with no checkpoint where it alone looks) tells the other workers through the shard
(``fail_setup``: its hello, naming the error, and its bye). They waited in the
start-up job check for it until the shard's ``--timeout``: its close says no bye (it never set
up), and a worker that never closes said nothing at all. The shard tells them "rank 0 could not
set up: ..." (``JobRefused``, exit 75: its victim), not that the ranks run different jobs.
Real shards on 127.0.0.1 port 0, served on a thread; the workers are processes (``run_main``)
or threads."""

from __future__ import annotations

import sys
import threading
import time
import urllib.request

import numpy as np
import pytest
from ps_helpers import insecure_worker, regression_net, run_ranks, script_ranks, served

from distconv.checkpoint import CheckpointError
from distconv.data import DataError
from distconv.parameter import Parameter
from distconv.service import ServiceEndpoints
from distconv.sync import JobRefused
from distconv.sync.peers import PEER_FAILED_STATUS
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from distconv.trainer import Trainer
from tests.setup_failures import FAILS_BEFORE_SETUP, NO_CHECKPOINT, TOLD_OF_RANK_0

#: the shard's --timeout, which the waiting rank heard the failure at; every test ends sooner
SHARD_TIMEOUT = 12.0


def _shard() -> Shard:
    return Shard(ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, timeout=SHARD_TIMEOUT))


@pytest.mark.timeout(60)
def test_a_worker_that_fails_before_setup_and_never_closes_is_heard_at_once(tmp_path):
    """Rank 0 fails in fit, then goes on without closing until rank 1 has ended: rank 1 says
    in one line (run_main's, exit 75: a victim to the launcher) that rank 0 could not set up,
    naming its error, not that the ranks run different jobs, well before the shard's
    timeout."""
    script = tmp_path / "fails.py"
    script.write_text(FAILS_BEFORE_SETUP)
    argv = [sys.executable, str(script), str(tmp_path / "none"), "linger"]
    with served(_shard()) as shard:
        began = time.monotonic()
        ended = script_ranks(argv, shard.endpoint, SHARD_TIMEOUT + 5)
        took = time.monotonic() - began
    (status0, err0), (status1, err1) = ended
    assert status1 == PEER_FAILED_STATUS and "Traceback" not in err1, err1[-2000:]
    (line,) = [x for x in err1.splitlines() if x.startswith("fails.py: error: ")]
    assert f"{TOLD_OF_RANK_0} {tmp_path / 'none'}/checkpoints" in line, line
    assert "run different jobs" not in err1, err1[-2000:]
    # rank 0's own error in run_main's one line, as distconv train says it
    assert status0 == 1 and f"fails.py: error: {NO_CHECKPOINT}" in err0, err0[-2000:]
    assert "Traceback" not in err0, err0[-2000:]
    assert took < SHARD_TIMEOUT, f"took {took:.1f} s: {line}"


def _heard(shard: Shard, rank: int) -> bool:
    """Whether the shard has taken ``rank``'s hello: a job's, or a failure note."""
    return rank in shard.accepted_at or rank in shard.noted_run


def _after_hello_of(shard: Shard, first: int, rank: int) -> None:
    """Return once the shard has taken ``first``'s hello (at once for ``first`` itself): the
    order of the two ranks' hellos, forced."""
    deadline = time.monotonic() + 10
    while rank != first and not _heard(shard, first):
        assert time.monotonic() < deadline, "the first rank's hello never came"
        time.sleep(0.01)


@pytest.mark.timeout(40)
@pytest.mark.parametrize("failing_first", [True, False], ids=["failing-first", "failing-second"])
def test_the_other_rank_hears_whichever_hello_the_shard_took_first(tmp_path, failing_first):
    """Threads as ranks, so that the order of the hellos is the test's: where the shard
    took rank 1's first, rank 1 waits in the job check's gather and rank 0's note answers it
    at once (rank 0 closes only once rank 1 has ended). Else the note comes first and rank 1's
    gather is answered with it as it comes."""
    data = {"x": np.ones((8, 4)), "target": np.zeros((8, 1))}
    rank1_done = threading.Event()
    with served(_shard()) as shard:

        def rank(r: int) -> BaseException:
            first = 0 if failing_first else 1
            _after_hello_of(shard, first, r)
            sync = insecure_worker([shard.endpoint], r, 2, timeout=SHARD_TIMEOUT)
            trainer = Trainer(regression_net(), sync, 2, out_dir=tmp_path / "none", progress=False)
            try:
                trainer.fit(data, epochs=1, resume=True)
            except Exception as exc:
                return exc
            finally:
                if r == 0:  # never closed while rank 1 waits
                    rank1_done.wait(SHARD_TIMEOUT + 5)
                else:
                    rank1_done.set()
                sync.close()
            raise AssertionError(f"rank {r}'s fit did not fail")

        began = time.monotonic()
        failed, told = run_ranks(rank, 2, timeout=SHARD_TIMEOUT + 10)
        took = time.monotonic() - began
    assert isinstance(failed, CheckpointError), repr(failed)
    assert str(failed).startswith(NO_CHECKPOINT), failed
    assert isinstance(told, JobRefused), repr(told)
    assert f"{TOLD_OF_RANK_0} {tmp_path / 'none'}/checkpoints" in str(told), told
    assert took < SHARD_TIMEOUT / 2, f"took {took:.1f} s: {told}"


@pytest.mark.timeout(40)
@pytest.mark.parametrize("failing_first", [True, False], ids=["failing-first", "failing-second"])
def test_a_setup_that_fails_before_its_hello_is_told_to_the_other_rank(failing_first):
    """Rank 1's own setup fails before its hello (two parameters named ``w``), the fit having
    nothing to do with it: rank 0's setup raises at once, naming rank 1's ValueError, where it
    waited in the job check until the shard's timeout (rank 1 closes only once it has ended)."""
    rank0_done = threading.Event()
    twice = [Parameter("w", np.ones(3)), Parameter("w", np.ones(2))]
    with served(_shard()) as shard:

        def rank(r: int) -> BaseException:
            first = 1 if failing_first else 0
            _after_hello_of(shard, first, r)
            sync = insecure_worker([shard.endpoint], r, 2, timeout=SHARD_TIMEOUT)
            try:
                sync.setup(twice if r == 1 else [Parameter("w", np.ones(3))])
            except Exception as exc:
                return exc
            finally:
                if r == 1:  # never closed while rank 0 waits
                    rank0_done.wait(SHARD_TIMEOUT + 5)
                else:
                    rank0_done.set()
                sync.close()
            raise AssertionError(f"rank {r}'s setup did not fail")

        began = time.monotonic()
        told, failed = run_ranks(rank, 2, timeout=SHARD_TIMEOUT + 10)
        took = time.monotonic() - began
    assert isinstance(failed, ValueError) and "two parameters are named 'w'" in str(failed)
    assert isinstance(told, JobRefused), repr(told)
    assert ": rank 1 could not set up: ValueError: two parameters are named " in str(told)
    assert took < SHARD_TIMEOUT / 2, f"took {took:.1f} s: {told}"


@pytest.mark.timeout(40)
def test_fits_that_fail_alike_on_every_rank_leave_the_shard_to_the_next_fit():
    """Both ranks' fits fail alike (NaN data: each note names its own rank), on a fresh shard
    and again after a fit that trained: each next fit, the data fixed, trains on the same
    shard (its values move on from the good fit's), the job never failed, /healthz 200
    (before, the second fit was refused as "run different jobs", the fourth as "another job
    than its first hello", and /healthz turned 503, until the shard restarted)."""
    bad = {"x": np.full((8, 4), np.nan), "target": np.zeros((8, 1))}
    good = {"x": np.ones((8, 4)), "target": np.zeros((8, 1))}
    with ServiceEndpoints(role="server", rank=0) as service:
        port = service.start()
        shard = _shard()
        shard.service = service
        with served(shard):

            def rank(r: int) -> list[object]:
                sync = insecure_worker([shard.endpoint], r, 2, timeout=SHARD_TIMEOUT)
                net = regression_net()
                trainer = Trainer(net, sync, 2, progress=False)
                said: list[object] = []
                try:
                    for data in (bad, good, bad, good):
                        try:
                            trainer.fit(data, epochs=1)
                            said.append([p.value.copy() for p in net.parameters()])
                        except DataError as exc:
                            said.append(exc)
                finally:
                    sync.close()
                return said

            ranks = run_ranks(rank, 2, timeout=SHARD_TIMEOUT + 10)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as ok:
                assert ok.status == 200, ok.read()
            assert shard.failed is None, shard.failed
    for failed_first, trained, failed_again, trained_again in ranks:
        assert isinstance(failed_first, DataError) and isinstance(failed_again, DataError)
        for before, after in zip(trained, trained_again):  # the fourth fit trained
            assert not np.array_equal(before, after)
