"""A Ctrl-C on one rank that lands as a gradient piece's collective is started, between the
start and its record (``run_start_interrupt.py``, real ``mpiexec -n 2``): the piece's
``Iallreduce`` returned and its request not yet stored (no communication thread), or the piece
handed to the thread and the hand-over not yet counted. Before, the interrupt lost the started
collective: the step's last pieces then started (or handed over) that piece again, one
collective more on that rank alone, and the job ended in an abort (the watchdog's, or close's)
instead of a failed step that every rank leaves cleanly."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, assert_moved, run_mpi, run_two_ranks, script

pytestmark = pytest.mark.timeout(60)


def _said(tmp_path, *args: str) -> list[str]:
    """What each rank's run of ``run_start_interrupt.py`` with ``args`` said its step raised."""
    run_two_ranks("run_start_interrupt.py", tmp_path, *args)
    return [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]


def _failed_there_alone(tmp_path, *args: str) -> None:
    """Rank 0 raised the interrupt, rank 1 finished the step, and both closed cleanly."""
    said = _said(tmp_path, *args)
    assert said == ["KeyboardInterrupt: ", "nothing"], said
    assert not list(tmp_path.glob("rank*.err"))


def _abandoned_and_drained(tmp_path, *args: str, first: str = "KeyboardInterrupt: ") -> None:
    """Rank 0's step raised ``first`` (the interrupt) and was abandoned; rank 1 refused it,
    and both setups after named the step one abandoned and the other counted."""
    said = _said(tmp_path, *args)
    assert said[0] == first, said
    assert said[1].startswith("SyncError: another rank abandoned the step"), said
    for rank in (0, 1):
        setup = (tmp_path / f"setup{rank}.txt").read_text()
        assert "rank 0 abandoned 1 step that rank 1 counted" in setup, setup


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["main", "thread"])
def test_an_interrupt_as_a_piece_starts_fails_the_step_and_close_is_clean(tmp_path, where):
    """The interrupt is raised once the piece is recorded: rank 0's finish_step raises it,
    rank 1's refuses the step (its flags said rank 0 failed), every collective of the step
    completes on both, and both close cleanly (the job exits 0)."""
    said = _said(tmp_path, where)
    assert said[0] == "KeyboardInterrupt: ", said
    assert said[1].startswith("SyncError: "), said
    assert not list(tmp_path.glob("rank*.err"))


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["main", "thread"])
def test_an_interrupt_as_a_piece_starts_in_backward_is_drained_by_the_next_setup(tmp_path, where):
    """Bucket 0 launched from ``on_gradient``: rank 0 raises the interrupt there and abandons
    the step; its next setup sends what the step left after the piece it recorded, so rank 1
    refuses the step ("another rank abandoned the step") and both setups name the step one
    abandoned and the other counted, then both close cleanly. Before, that setup started (or
    handed over) the lost piece again: rank 1 waited for a piece rank 0 never sent."""
    _abandoned_and_drained(tmp_path, where, "launch")


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_as_a_16_bit_bucket_starts_by_hand_fails_the_step_on_that_rank(tmp_path):
    """A 16-bit wire without the thread: rank 0 interrupted as its first bucket's
    ``Ialltoall`` (the reduction by hand's first collective) returned, before its wait. The
    interrupt is kept as a wait's is: rank 0 ends the step's collectives as rank 1 does, then
    raises it (the step failed there alone); rank 1 finishes the step; both close cleanly.
    Before, rank 0 left that request behind and never started the bucket's ``Iallgather``,
    which rank 1 waited in until the watchdog aborted the job."""
    _failed_there_alone(tmp_path, "wire")


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize(
    "where", ["check", "thread-check", "check-returned", "thread-check-returned"]
)
def test_an_interrupt_as_the_step_check_starts_fails_the_step_on_every_rank(tmp_path, where):
    """Rank 0 interrupted as ``start_step``'s check (its ``Iallgather``) returned, before its
    request was stored (or once its post returned, before the step was open). The interrupt is
    kept until ``finish_step`` has packed the buckets, then said in the flags: rank 0 raises
    it, rank 1 refuses the step, no rank updates, and both close cleanly. Before, ``start_step``
    raised it with the check's request lost and the step never begun on rank 0, while rank 1
    waited in the step's collectives until the watchdog aborted the job (once the post
    returned: the check left pending, rank 0's close met it, and MPICH aborted)."""
    said = _said(tmp_path, where)
    assert said[0] == "KeyboardInterrupt: ", said
    assert said[1].startswith("SyncError: another rank's finish_step failed"), said
    assert not list(tmp_path.glob("rank*.err"))


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["flags", "thread-flags"])
def test_an_interrupt_as_the_flags_start_fails_the_step_on_that_rank(tmp_path, where):
    """Rank 0 interrupted as the used-parameter flags' ``Iallreduce`` returned, before its
    request was stored (no thread), or as their start was queued to the thread. The
    interrupt is kept as a wait's is: rank 0 sends the step's last pieces and completes the
    flags as rank 1 does, then raises it (the step failed there alone); rank 1 finishes the
    step; both close cleanly. Before, rank 0 raised
    it with the flags' request lost (or queued) and its last pieces never sent: rank 1 waited
    for them until the watchdog aborted the job."""
    _failed_there_alone(tmp_path, where)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_kept_at_the_step_check_is_raised_by_abandon_step(tmp_path):
    """Rank 0 interrupted as ``start_step``'s check started, then abandons the step (a layer
    raised in backward): ``abandon_step`` raises the kept interrupt once the step is let go
    of; the setups that follow drain the step on both ranks (rank 1 refuses it, and both
    name the step one abandoned and the other counted), and both close cleanly. Before, the
    interrupt was dropped there (the next ``start_step`` forgot it): the user's Ctrl-C lost."""
    _abandoned_and_drained(tmp_path, "check", "abandon")


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_kept_at_the_step_check_wins_over_a_failed_pack(tmp_path):
    """Rank 0 interrupted as ``start_step``'s check started, then its ``finish_step`` fails to
    pack a bucket before it raised the kept interrupt: the flags say rank 0 failed (rank 1
    refuses the step), and rank 0 raises the interrupt, the pack's error its context; both
    close cleanly. Before, rank 0 raised the pack's error alone: the Ctrl-C was dropped."""
    said = _said(tmp_path, "check", "pack")
    assert_interrupt_over_a_failed_pack(said, tmp_path)


def assert_interrupt_over_a_failed_pack(said: list[str], folder) -> None:
    """What the ranks said (``said``) and left in ``folder`` where rank 0 raised a Ctrl-C over
    its failed pack of bucket 0: the interrupt, the pack's error its context; rank 1 refused
    the step; neither rank's close aborted (no ``rank*.err``)."""
    assert said[0] == "KeyboardInterrupt: ", said
    assert said[1].startswith("SyncError: another rank's finish_step failed"), said
    context = (folder / "context0.txt").read_text()
    assert context.startswith("RuntimeError('copying bucket 0 to the host failed"), context
    assert not list(folder.glob("rank*.err"))


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_as_setup_starts_the_owed_flags_is_raised_once_they_are_in(tmp_path):
    """Rank 0 abandons step 0, and its next setup is interrupted as it starts the flags the
    step owes (their ``Iallreduce`` returned, its request not yet stored): that setup raises
    the interrupt once it is made (held from its start), its check (which names the step one
    abandoned and the other counted) met with rank 1's, that refusal its context, and both
    ranks close cleanly. Before, the interrupt lost the request with the flags still
    owed: the setup made again started them a second time, on rank 0 alone, against rank 1's
    check, and the job was aborted."""
    _abandoned_and_drained(tmp_path, "flags", "abandon", first="nothing")
    assert (tmp_path / "again0.txt").read_text() == "KeyboardInterrupt: "
    assert not (tmp_path / "again1.txt").exists()


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["wire-before", "wire-after"])
def test_an_interrupt_around_a_wait_by_hand_fails_the_step_on_that_rank(tmp_path, where):
    """A 16-bit wire without the thread: rank 0 interrupted around its first bucket's first
    wait by hand, where no start is held and the wait's keeping has not begun (or has ended).
    The interrupt is kept: rank 0 makes the wait (again) and starts the bucket's next
    collective as rank 1 does, then raises it; rank 1 finishes the step; both close cleanly.
    Before, it went up from there: the wait was never made (or the ``Iallgather`` never
    started), and rank 1 waited in that collective until the job was aborted."""
    _failed_there_alone(tmp_path, where)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_kept_at_the_step_check_is_raised_by_a_setup_that_lets_the_step_go(
    tmp_path,
):
    """Rank 0 interrupted as ``start_step``'s check started; then each rank sets up again at
    once, the step neither finished nor abandoned. Rank 0's setup raises the kept interrupt
    once it has set up as rank 1 did, and the step both take next trains alike. Before, that
    setup let the step go without raising it, and the next ``start_step`` forgot it."""
    said = _said(tmp_path, "check", "setup")
    assert said == ["KeyboardInterrupt: ", "nothing"], said
    assert_moved(tmp_path, 0.75)  # the last step alone: (1 + 2) / 2 examples * lr 0.5


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["wire-between", "wire-entry", "thread-between"])
def test_an_interrupt_between_buckets_fails_the_step_on_that_rank(tmp_path, where):
    """Rank 0 interrupted in ``finish_step``'s reduction outside any wait or held start: once
    bucket 0 is copied back, before bucket 1 (a 16-bit wire by hand; or the communication
    thread's), or as bucket 0's reduction by hand begins. The interrupt is kept as a wait's
    is: rank 0 reduces the buckets left (none twice) and completes the flags as rank 1 does,
    then raises it (the step failed there alone); rank 1 finishes the step; both close
    cleanly. Before, it went up at once: rank 1 waited in a collective rank 0 never started
    (by hand), or rank 0's failure went untold and its close aborted the job (the thread)."""
    _failed_there_alone(tmp_path, where)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_as_finish_step_begins_leaves_the_step_to_abandon(tmp_path):
    """Rank 0 interrupted as ``finish_step`` begins, before any bucket went: the step is still
    open there, so ``abandon_step`` counts it and the next setup sends what it left (rank 1
    refuses it, both setups name the step one abandoned and the other counted) and both
    close cleanly. Before, ``finish_step`` had marked the step over first: ``abandon_step``
    let nothing go, and rank 1 waited for rank 0's pieces until the watchdog aborted."""
    _abandoned_and_drained(tmp_path, "finish")


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["reduced", "thread-reduced"])
def test_an_interrupt_once_every_bucket_is_reduced_fails_the_step_there_alone(tmp_path, where):
    """Rank 0 interrupted once ``reduce_all`` returned, before its updates: every collective
    of the step is in, so rank 0 raises it and tells its failure (the step failed there
    alone), rank 1 finishes the step, and both close cleanly. Before, it went up untold:
    rank 0's close, seeing the step neither finished nor failed alike, aborted the job."""
    _failed_there_alone(tmp_path, where)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["posted", "thread-posted"])
def test_an_interrupt_once_the_flags_started_sends_the_last_pieces(tmp_path, where):
    """Rank 0 interrupted once the used-parameter flags' start returned, before the step's
    last pieces went: kept as a wait's, the pieces sent and every collective of the step
    completed as on rank 1, then raised (the step failed there alone); rank 1 finishes the
    step and both close cleanly. Before, it went up at once: rank 1 waited for pieces rank 0
    never sent, until the watchdog aborted the job."""
    _failed_there_alone(tmp_path, where)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["recorded", "thread-recorded"])
def test_an_interrupt_once_the_step_is_done_leaves_it_over(tmp_path, where):
    """Rank 0 interrupted once ``finish_step`` made the step's last collective (the first
    step's firing order, gathered), every update made: it raises the interrupt, but the step
    is over on both ranks, and both close cleanly. Before, the step was still marked open
    there: rank 0's close aborted the job ("sync closed in the middle of step 0")."""
    _failed_there_alone(tmp_path, where)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("how", [[], ["later"]])
@pytest.mark.parametrize("where", ["updated", "thread-updated"])
def test_an_interrupt_once_every_update_is_made_leaves_the_step_over(tmp_path, where, how):
    """Rank 0 interrupted once ``update_step`` returned into ``finish_step`` (every collective
    and every update of the step made), in the first step or a later one (``later``: the
    firing order recorded by the first): it raises the interrupt, rank 1 finishes the step,
    and both close cleanly. Before, ``finish_step`` took the step for one that failed before
    its updates (neither over nor told as failed alone): in the first step rank 0 never made
    the firing order's exchange rank 1 waited in, and in either its close aborted the job
    ("sync closed in the middle of step 0")."""
    _failed_there_alone(tmp_path, where, *how)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("how", [[], ["later"]])
def test_an_interrupt_at_finish_steps_last_clock_read_leaves_the_step_over(tmp_path, how):
    """Rank 0 interrupted as ``finish_step`` reads its clock a last time, every update made,
    in the first step or a later one: it raises the interrupt, rank 1 finishes the step, and
    both close cleanly. Before, in the first step, the interrupt went up before the firing
    order's exchange, which rank 1 waited in, with the step still open on rank 0: its close
    aborted the job."""
    _failed_there_alone(tmp_path, "clock", *how)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["post-entry", "thread-post-entry"])
def test_an_interrupt_before_the_flags_start_is_made_keeps_the_step_going(tmp_path, where):
    """Rank 0 interrupted as ``send_last`` calls the flags' ``post``, before its start is
    reached (nothing made): the interrupt is kept and the flags started after all, so rank 0
    raises it once the step's collectives are done, rank 1 finishes the step, and both close
    cleanly. Before, ``send_last`` raised it at once (the flags not started: taken for a start
    that raised, made or not): rank 1 waited in the flags and rank 0's close aborted the job
    ("sync closed in the middle of step 0")."""
    _failed_there_alone(tmp_path, where)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_as_finish_step_begins_to_send_keeps_the_step_going(tmp_path):
    """Rank 0 interrupted as ``finish_step`` calls ``send_and_update``, before that call's
    keeping begins (nothing sent), at the earliest: the ``partial`` made for the call: the
    interrupt is kept as one inside it is, so rank 0 raises it once the step's collectives are
    done, rank 1 finishes the step, and both close cleanly. Before, it went up at once: rank 1
    waited in the flags and rank 0's close aborted the job ("sync closed in the middle of step
    0"); at the ``partial`` (made before the keeping's try) it still did so until a later fix."""
    _failed_there_alone(tmp_path, "send-entry")


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_as_the_flags_start_raises_goes_up_at_once(tmp_path):
    """Rank 0's flags' start made, then raised, a Ctrl-C noted meanwhile (made or not,
    unknown to ``send_last``): the interrupt goes up at once and rank 0's close aborts the job
    at once. Made again (``send_last`` without its ``start_unknown`` guard), the start was a
    second flags' exchange on rank 0 alone: the ranks waited in different collectives until
    the watchdog aborted them."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_start_interrupt.py"), str(tmp_path), "flags-raised"])
    assert proc.returncode != 0, proc.stderr  # the step is open: close aborts, nobody hangs
    assert "rank 0: SyncError: sync closed in the middle of step 0" in proc.stderr, proc.stderr
    assert "different collectives" not in proc.stderr, proc.stderr
    assert (tmp_path / "said0.txt").read_text() == "KeyboardInterrupt: "
    context = (tmp_path / "context0.txt").read_text()
    assert "the flags' start raised once made" in context, context
