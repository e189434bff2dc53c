"""Which later setups a shard takes at a new rate (``optimizer.set_base_lr`` between fits),
request by request on an in-process shard (its requests handed over one at a time, so the
order of the hellos is fixed): only a second setup of the same workers whose hellos differ
from the held job in ``optimizer.lr`` alone, and all at one rate. A hello of another model at
another rate, or a restarted worker (a new run) at another rate, is another job, and the held
rate stays; two ranks of one setup at two new rates are refused, naming both; in sync and
async mode alike. A setup is judged by its own hellos (each worker's setups since the seed,
by the number its hellos carry, or counted where they carry none): not those of a refused
setup before it, however late they came, nor a worker's taken back into the job or restarted
beside it, nor a hello said again while a rank is late; and two shards that one rank's mistake
left at different rates agree again at the next setup."""

from __future__ import annotations

import pytest
from test_ps_stuck import _hello_run

from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.rate_agreement import SAME_NEW_RATE

pytestmark = pytest.mark.timeout(30)

#: the first setup's rate, and two others a later setup's hellos may carry
OLD, NEW, OTHER = 0.05, 0.2, 0.3
#: the run ids of the workers of ranks 0 and 1 (a second setup of a worker keeps its run id)
RUNS = (5, 11)


def job(lr: float, shape: int = 4) -> dict:
    """A job's description: one parameter of ``shape`` values, SGD at ``lr``."""
    return {"optimizer": {"name": "sgd", "lr": lr}, "parameters": [["w", [shape], "float64"]]}


def set_up(hand, mode: str):
    """A shard of ``mode`` for two workers, both of whose first setup said hello at
    :data:`OLD`, seeded: the next hellos are of their second setup (a second ``fit``)."""
    h = hand(workers=2, mode=mode)
    for rank in (0, 1):
        assert _hello_run(h, rank, RUNS[rank], job(OLD))["op"] == "ok"
    h.seed()
    return h


def held_rate(h) -> float:
    return h.shard.job.described["optimizer"]["lr"]


def said(reply: dict) -> str:
    assert reply["op"] == "error" and reply.get("refused") == "job", reply
    return reply["error"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_later_setup_of_another_model_at_another_rate_is_another_job(hand, mode):
    h = set_up(hand, mode)
    refused = said(_hello_run(h, 0, RUNS[0], job(NEW, shape=5)))
    assert "runs another job than its first hello" in refused, refused
    assert held_rate(h) == OLD


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_restarted_worker_at_another_rate_is_another_job(hand, mode):
    """A new run of rank 0 (its process restarted, an edited config) does not move the rate
    of the job its peers train on."""
    h = set_up(hand, mode)
    refused = said(_hello_run(h, 0, RUNS[0] + 1, job(NEW)))
    assert f"optimizer.lr: {NEW} here, {OLD} there" in refused, refused
    assert held_rate(h) == OLD


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_ranks_of_one_setup_at_two_new_rates_are_refused_naming_both(hand, mode):
    h = set_up(hand, mode)
    assert _hello_run(h, 0, RUNS[0], job(NEW))["op"] == "ok"
    assert held_rate(h) == NEW
    refused = said(_hello_run(h, 1, RUNS[1], job(OTHER)))
    assert refused.startswith(
        f"rank 1 and rank 0 run different jobs: optimizer.lr: {OTHER} here, {NEW} there "
        "(here: rank 1's hello; there: rank 0's, of the same setup)"
    ), refused
    assert SAME_NEW_RATE in refused
    assert held_rate(h) == NEW


def after_a_refused_setup(hand):
    """Setup 2: rank 1 kept the old rate (its hello, first, is accepted), rank 0 set the new
    one (refused); the user then sets it on rank 1 too."""
    h = set_up(hand, "sync")
    assert _hello_run(h, 1, RUNS[1], job(OLD))["op"] == "ok"
    said(_hello_run(h, 0, RUNS[0], job(NEW)))
    return h


def after_a_rank_rejoined(hand):
    """Async, a lost worker's rank taken back: rank 1's worker restarted inside the first fit
    (a new run, which rank 0 does not seed for), and its script set the new rate too."""
    h = hand(workers=2, mode="async", on_worker_loss="continue")
    for rank in (0, 1):
        assert _hello_run(h, rank, RUNS[rank], job(OLD))["op"] == "ok"
    h.seed()
    assert _hello_run(h, 1, RUNS[1] + 1, job(OLD))["op"] == "ok"
    return h


@pytest.mark.parametrize("before", [after_a_refused_setup, after_a_rank_rejoined])
def test_a_setup_is_judged_by_its_own_hellos(hand, before):
    """The next setup's hellos all carry the new rate, rank 0's first: both are taken."""
    h = before(hand)
    runs = {0: RUNS[0], 1: h.shard.run_of[1]}
    assert _hello_run(h, 0, runs[0], job(NEW))["op"] == "ok"
    assert _hello_run(h, 1, runs[1], job(NEW))["op"] == "ok"
    assert held_rate(h) == NEW


def test_a_slow_rank_of_a_refused_setup_is_not_taken_for_the_next_ones(hand):
    """Three ranks. Setup 2: rank 1 kept the old rate, rank 0's new one is refused, and rank
    2's hello (the new rate too) comes after that refusal: still of setup 2. Setup 3 sets
    another rate on every rank: rank 0's hello, first, is taken, naming no rank of setup 2."""
    h = hand(workers=3, mode="sync")
    runs = (*RUNS, 17)
    for rank in range(3):
        assert _hello_run(h, rank, runs[rank], job(OLD))["op"] == "ok"
    h.seed()
    assert _hello_run(h, 1, runs[1], job(OLD))["op"] == "ok"
    said(_hello_run(h, 0, runs[0], job(NEW)))
    _hello_run(h, 2, runs[2], job(NEW))  # of the failed setup: taken or not, it fails
    for rank in range(3):
        assert _hello_run(h, rank, runs[rank], job(OTHER))["op"] == "ok", rank
    assert held_rate(h) == OTHER


def test_two_shards_that_took_different_rates_agree_at_the_next_setup(hand):
    """One rank's mistake, two shards: each took the rate of the hello it heard first, and
    refused the other. The next setup, every rank at the new rate, is taken by both, in
    either order."""
    shards = [set_up(hand, "sync") for _ in range(2)]
    for h, (first, second) in zip(shards, [(0, 1), (1, 0)]):
        rate = {0: NEW, 1: OLD}
        assert _hello_run(h, first, RUNS[first], job(rate[first]))["op"] == "ok"
        said(_hello_run(h, second, RUNS[second], job(rate[second])))
    assert [held_rate(h) for h in shards] == [NEW, OLD]
    for h, order in zip(shards, [(1, 0), (0, 1)]):
        for rank in order:
            assert _hello_run(h, rank, RUNS[rank], job(NEW))["op"] == "ok", rank
        assert held_rate(h) == NEW


def test_a_refused_restart_beside_its_ranks_worker_leaves_that_worker_in_step(hand):
    """A restart of rank 0 (a new run) refused while rank 0's worker lives on beside it: that
    worker's next setup is still its second, so rank 1's hello of that setup at another rate
    is refused, naming rank 0, and the held rate stays rank 0's."""
    h = set_up(hand, "sync")
    said(_hello_run(h, 0, RUNS[0] + 1, job(NEW)))
    assert _hello_run(h, 0, RUNS[0], job(NEW))["op"] == "ok"
    refused = said(_hello_run(h, 1, RUNS[1], job(OTHER)))
    assert "there: rank 0's, of the same setup" in refused, refused
    assert held_rate(h) == NEW


def numbered_hello(h, rank: int, setup: int, lr: float) -> dict:
    """Rank ``rank``'s hello (its worker of :data:`RUNS`) of its ``setup``-th setup, as a
    worker that numbers its setups says it, at ``lr``; the reply's header."""
    head = {"op": "hello", "rank": rank, "host": "h", **hello_fields(job(lr)), "run": RUNS[rank]}
    return h.ask({**head, "setup": setup})[0]


def numbered_set_up(hand, **config):
    """:func:`set_up` of workers that number their setups: their first, seeded at :data:`OLD`
    (a sync shard of ``config``'s other settings)."""
    h = hand(workers=2, mode="sync", **config)
    for rank in (0, 1):
        assert numbered_hello(h, rank, 1, OLD)["op"] == "ok"
    h.seed()
    return h


def test_a_hello_said_again_while_a_rank_is_late_is_of_the_same_setup(hand):
    """Setup 2: rank 1 is late to the job check, so rank 0 says hello again (late_ranks.py's
    rounds), of the same number; rank 1 comes at last without the new rate: refused, naming
    rank 0. Setup 3, every rank at the new rate, rank 1's hello first: taken. (Counted, rank
    0's second hello hid its first: rank 1's old rate was taken, then its new one refused,
    quoting the old rate as rank 0's; a worker that sends no number still is counted so.)"""
    h = numbered_set_up(hand)
    for _ in range(2):
        assert numbered_hello(h, 0, 2, NEW)["op"] == "ok"
    refused = said(numbered_hello(h, 1, 2, OLD))
    assert "there: rank 0's, of the same setup" in refused, refused
    for rank in (1, 0):
        assert numbered_hello(h, rank, 3, NEW)["op"] == "ok", rank
    assert held_rate(h) == NEW


def test_a_setup_a_rank_failed_before_its_hello_keeps_the_ranks_in_step(hand):
    """Setup 2: rank 1 fails before its hello (none said), rank 0's at the new rate is taken.
    Setup 3, rank 1 first, at another rate: its number says it is of setup 3, so it moves the
    rate, and rank 0's at the same one is taken (counted, it was setup 2's, and refused)."""
    h = numbered_set_up(hand)
    assert numbered_hello(h, 0, 2, NEW)["op"] == "ok"
    for rank in (1, 0):
        assert numbered_hello(h, rank, 3, OTHER)["op"] == "ok", rank
    assert held_rate(h) == OTHER


def test_a_setup_number_that_goes_back_is_refused(hand):
    """A worker's setups are only begun: a hello numbered below its hello before is
    malformed, and the held job stays."""
    h = numbered_set_up(hand)
    assert numbered_hello(h, 0, 3, NEW)["op"] == "ok"
    reply = numbered_hello(h, 0, 2, OTHER)
    assert reply["op"] == "error", reply
    assert "hello: setup 2 of this worker's run after its setup 3" in reply["error"], reply
    assert held_rate(h) == NEW


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        (-1, "hello: setup -1 is not a count of its worker's setups (an int >= 0)"),
        (True, "header field 'setup' has type bool"),
        (2.0, "header field 'setup' has type float"),
    ],
    ids=["negative", "bool", "float"],
)
def test_a_malformed_setup_number_is_refused_naming_it(hand, setup, words):
    """A hello whose ``setup`` is no count (below 0, or not an int) is refused as malformed,
    first hello or later, in words that name the field; the held job stays. (Below 0 was
    taken: the worker's next hello, numbered 0, was counted setups ahead of its peers.)"""
    h = hand(workers=2, mode="sync")
    for hellos in ([], [1]):  # a first hello; one after the worker's first setup
        for number in hellos:
            assert numbered_hello(h, 0, number, OLD)["op"] == "ok"
        reply = numbered_hello(h, 0, setup, OLD)
        assert reply["op"] == "error" and words in reply["error"], reply
