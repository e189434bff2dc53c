"""What shard 0 tells the ranks waiting in a setup's job check past its ``--timeout`` for a
rank whose worker lives on (a notebook's kernel, no ``bye``): that rank's refusal, where its
hello of this very setup was refused as another job (a rate set between fits on some ranks
only), and that the rank is late, where its refused hello was of an earlier setup (fixed
since, it has not yet said this setup's hello: a notebook's cells run one at a time). A shard
fed by hand, its clock moved by the test."""

from __future__ import annotations

import time

import pytest
from test_lr_between_fits_setups import NEW, OLD, numbered_hello, numbered_set_up, said
from test_ps_stuck import _gather

from distconv.sync.ps.late_job_check import NOT_FAILED

TIMEOUT = 1.0


def told_at_the_timeout(h, rank: int) -> dict:
    """``rank`` waits in the job check; the shard's clock moves past ``--timeout``: its
    answer."""
    _gather(h, rank, "all_equal:1")
    h.shard._check_timeouts(time.monotonic() + TIMEOUT + 1.0)
    return h.read()[0]


@pytest.mark.timeout(30)
def test_a_refusal_of_an_earlier_setup_is_not_told_as_this_ones(hand):
    """Setup 2: rank 0 at the new rate, rank 1's hello at the old one refused; rank 0 is told
    that refusal. Setup 3: rank 0 again, rank 1 not yet come: rank 0 is told rank 1 is late
    (it says hello again, and rank 1, its rate set now, joins), not setup 2's refusal, which
    failed a fit that rank 1's hello would have completed."""
    h = numbered_set_up(hand, timeout=TIMEOUT)
    assert numbered_hello(h, 0, 2, NEW)["op"] == "ok"
    refused = said(numbered_hello(h, 1, 2, OLD))
    told = told_at_the_timeout(h, 0)
    assert told.get("refused") == "job" and told["error"].startswith(refused), told
    assert numbered_hello(h, 0, 3, NEW)["op"] == "ok"
    told = told_at_the_timeout(h, 0)
    assert told["late"] == [1] and told["error"].endswith(NOT_FAILED), told
    assert "refused" not in told and not h.shard.failed, told
