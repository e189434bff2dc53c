"""mpiexec -n 2 python -m mpi4py run_check_refused_in_backward.py OUT MODE OVERLAP CAUGHT: the
step check refuses step 0 in backward, as its first bucket is launched (the last parameter fires,
its bucket is full), on the ranks that reach it; then each rank closes its sync, the refusal
propagating through ``close`` (``finally: sync.close()``, CAUGHT 0) or caught before it (1):

- ``rates``: rank 1 trains at twice rank 0's rate (a ``JobMismatch``, raised alike);
- ``layout``: rank 0 claims another firing order, so its buckets are laid out the other way
  round (a SyncError);
- ``closed``: rank 1 closes at once, where rank 0 is in the step;
- ``failed``: rank 0's ``finish_step`` of a step before fails on it alone (told at its next
  ``start_step``), while rank 1 goes on to the next step.

Each rank writes what its step raised to ``OUT/said<rank>.txt`` (``nothing`` where it raised
nothing) and, once its close returned, what close raised to ``OUT/closed<rank>.txt``; a close
that aborts the job ends it with a status not 0, before any ``closed`` file.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from distconv.sync.base import SyncError
from tests.mpi.common import bucket_params, bucket_sync, finish_failed_on_rank_0, fire


def step(sync, params, mode: str) -> None:
    """Step 0 (step 1 in ``failed``) up to its first bucket's launch, in backward."""
    if mode == "failed":
        finish_failed_on_rank_0(sync, params)  # rank 0 refuses its next start_step, telling
    if mode == "rates":
        sync.optimizer.scale_lr(1.0 + sync.rank)
    if mode == "layout" and sync.rank == 0:  # setup laid them out last to first
        sync.set_firing_order([p.name for p in params])
    if mode == "closed" and sync.rank == 1:
        return
    sync.start_step(1)
    try:
        fire(sync, params[-1], 1.0)  # its bucket is full: launched, the check completed first
        fire(sync, params[0], 1.0)
        sync.finish_step()
    except BaseException:
        sync.abandon_step()  # as the Trainer's fit does
        raise


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    overlap, caught = sys.argv[3] == "1", sys.argv[4] == "1"
    sync, params = bucket_sync(overlap=overlap, timeout=5), bucket_params()
    said = "nothing"
    sync.setup(params, {})
    try:
        try:
            step(sync, params, mode)
        except SyncError as exc:
            said = f"{type(exc).__name__}: {exc}"
            (out / f"said{sync.rank}.txt").write_text(said)
            if not caught:
                raise
        finally:
            (out / f"said{sync.rank}.txt").write_text(said)
            if not caught:
                sync.close()
        if caught:
            sync.close()
    except SyncError as exc:
        with contextlib.suppress(OSError):
            (out / f"closed{sync.rank}.txt").write_text(f"{type(exc).__name__}: {exc}")
        return
    (out / f"closed{sync.rank}.txt").write_text("nothing")


if __name__ == "__main__":
    main()
