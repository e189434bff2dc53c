"""A Ctrl-C as the step check names a mismatch (after the exchange was read, before its
SyncError is raised: building the message calls Python functions, each a point where Python
runs a SIGINT's handler): the next ``complete`` must still refuse the step, as every other rank
did. Before, the exchange was marked read first, so the next ``complete`` (``finish_step``'s
handler of the interrupt, or the next setup's drain of the step) returned None: that rank took
the step as checked, marked its flags failed and sent its pieces and flags alone, where every
other rank had refused the step at the check and sent nothing; a hang the watchdog or close
ended by aborting the job. Likewise a Ctrl-C on a passing check, once marked read: the next
``complete`` returned None, the step's examples and match unlearned. In-process: one rank's
check with another rank's row given."""

from __future__ import annotations

import pytest

from distconv.sync.mpi import step_check
from distconv.sync.mpi.step_check import StepCheck
from tests.mpi.run_start_interrupt import interrupted_before
from tests.mpi.test_check_interrupt import TwoRanks, assert_mismatch_kept_past_the_interrupt


def test_an_interrupt_as_a_mismatch_is_named_leaves_it_for_the_next_complete():
    """Rank 1 at step 1, this rank at step 0: a real SIGINT as the mismatch is named is raised
    there; the next ``complete`` raises the mismatch (once), not None."""
    check = StepCheck(TwoRanks([1, 7, 3]))
    check._raise_elsewhere = interrupted_before(check._raise_elsewhere)  # type: ignore[method-assign]
    assert_mismatch_kept_past_the_interrupt(check)


def test_an_interrupt_as_a_passing_check_sums_the_examples_leaves_it_for_the_next_complete(
    monkeypatch,
):
    """The ranks agree: a real SIGINT as the examples are summed is raised there; the next
    ``complete`` returns the sum (once), so the step's mean and its match are learned (an
    abandoned step's drain at the next setup needs it), not None."""
    monkeypatch.setattr(step_check, "sum", interrupted_before(sum), raising=False)
    check = StepCheck(TwoRanks([0, 7, 3]))
    check.post(0, {}, 7, 2)
    with pytest.raises(KeyboardInterrupt):
        check.complete()
    assert (check.complete(), check.complete()) == (5, None)
