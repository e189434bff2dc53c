"""mpiexec -n 2 python -m mpi4py run_step_numbers.py CASE OUT [RUN_DIR EPOCHS [reversed]]:
MPISync's words name the run's steps, as the Trainer tells them (``start_at``), not the steps
this process took.

- ``resumed``: the Trainer on 16 examples, 2 a rank a step (4 steps an epoch), checkpointing
  every 2 steps in ``RUN_DIR`` and resuming what it finds, for ``EPOCHS`` epochs. With
  ``reversed``, rank 1 lays out its buckets by the reverse of the firing order it is told after
  the fit's first step (a fault no Trainer makes, provoked by a subclass: the step check names
  it), so the fit's second step is refused.
- ``apart``: ``start_at(8)`` on every rank and a step; then ``start_at(9)`` and rank 0 starts
  step 9 (its second ``start_step`` completes the check) while rank 1 sums metrics.
- ``unfinished``: ``start_at(8)`` and ``start_step`` on every rank, then ``start_at(9)`` and
  ``start_step`` again, without ``finish_step``.
- ``stuck``: ``start_at(8)``; rank 1 sleeps before its ``start_step`` while rank 0's step waits
  for it in the step check, until the watchdog (1 s) stops the job.
- ``refit`` and ``close``: ``start_at`` as the Trainer calls it around a step every rank skips
  (a sequence set's step of no row): step 0's ``finish_step`` fails on rank 0 alone (a
  gradient replaced after it fired), then ``start_at(2)``; rank 0's ``start_step`` is refused
  and tells rank 1, whose step 2 is refused at its check (in ``finish_step``); each abandons
  it. ``refit``: each sets up again and takes a last step (``OUT/values<rank>.npz``);
  ``close``: each closes.
- ``retried``: the same through the Trainer, on the tagger's sentences (step 1 holds no token
  on any rank): rank 0's optimizer fails once, in step 0 (a fault provoked by a wrapper), and
  each rank calls ``fit`` again, up to 3 times, as the refusals advise; each writes what each
  fit raised to ``OUT/fits<rank>.json``. The sync is told the firing order before the fit, so
  that no meeting after step 0 (the ranks agreeing on the order) finds rank 0's failure first;
  ``retried_untold``: the same told nothing, so that rank 1 meets it there.

Each rank's error goes to ``OUT/rank<r>.err`` (``mpiexec`` may drop an aborting rank's
stderr); in case ``stuck``, its stderr and its log, where the watchdog says why it stopped.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    bucket_params,
    bucket_sync,
    finish_failed_on_rank_0,
    fire,
    last_step,
    recorded,
    refit_and_save,
    small_lenet,
    trainer_data,
)
from run_stall import record_to  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.base import SyncError  # noqa: E402
from distconv.sync.mpi import MPISync, import_mpi  # noqa: E402
from distconv.trainer import Trainer  # noqa: E402
from tests.sequence_tagger import GLOBAL, OPTIMIZER, tagged_set, tagger  # noqa: E402


class ReversedOrder(MPISync):
    """Rank 1 lays out its buckets by the reverse of the firing order it is told."""

    def set_firing_order(self, names):
        super().set_firing_order(list(names)[::-1] if self.rank == 1 else names)


def resumed(out: Path, run_dir: Path, epochs: int, reverse: bool) -> None:
    make = ReversedOrder if reverse else MPISync
    sync = make(create_optimizer("sgd"), bucket_bytes=300)
    with recorded(sync, out):
        trainer = Trainer(
            small_lenet(seed=0),
            sync,
            2,
            progress=False,
            dtype="float64",
            out_dir=run_dir,
            checkpoint_every=2,
        )
        trainer.fit(trainer_data(16), epochs=epochs, resume="auto")


def by_hand(case: str, out: Path) -> None:
    world = import_mpi().COMM_WORLD
    world.Barrier()  # every rank started: the watchdog's second counts from a common start
    timeout = 1.0 if case == "stuck" else 600.0  # the watchdog's; 600 s: never here
    sync = MPISync(create_optimizer("sgd"), bucket_bytes=24, timeout=timeout)
    params = bucket_params()
    if case == "stuck":
        record_to(out, sync.rank)
    with recorded(sync, out):
        sync.setup(params, {})
        sync.start_at(8)
        if case == "stuck":
            if sync.rank == 1:
                time.sleep(60)  # the watchdog's abort ends it
            sync.start_step(1)
            fire(sync, params[-1], 1.0)  # completes the check: waits for rank 1
        elif case == "unfinished":
            sync.start_step(1)
            sync.start_at(9)
            sync.start_step(1)
        else:  # apart
            last_step(sync, params)
            sync.start_at(9)
            if sync.rank == 0:
                sync.start_step(1)
                sync.start_step(1)  # completes the check, which names the difference
            else:
                sync.allreduce_sum([1.0, 2.0])


def failed_alone_then_skipped(case: str, out: Path) -> None:
    sync, params = bucket_sync(timeout=20), bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        sync.start_at(0)
        finish_failed_on_rank_0(sync, params)
        sync.start_at(2)  # step 1 held no row on any rank: skipped, counted in the run
        with contextlib.suppress(SyncError):  # refused: on rank 1 at its check, every
            sync.start_step(1)  # collective of it made (close leaves)
            sync.finish_step()
        sync.abandon_step()  # as the Trainer does
        if case == "refit":
            refit_and_save(sync, params, out)


def retried(out: Path, told: bool = True) -> None:
    sync = MPISync(create_optimizer(**OPTIMIZER), timeout=30)
    update, failed, fits = sync.optimizer.update, [], []

    def fails_once_on_rank_0(value, grad, state, grad_scale=1.0):
        if sync.rank == 0 and not failed:
            failed.append(True)
            raise FloatingPointError("the optimizer fails on rank 0")
        update(value, grad, state, grad_scale=grad_scale)

    sync.optimizer.update = fails_once_on_rank_0
    try:
        net = tagger()
        if told:  # no meeting after step 0 (the ranks agreeing on the order) meets rank 0's
            # failure before rank 1 reaches step 2
            sync.set_firing_order([p.name for p in reversed(net.parameters())])
        trainer = Trainer(net, sync, GLOBAL // 2, progress=False, dtype="float64")
        for _ in range(4):
            try:
                trainer.fit(tagged_set(), None, 1)
            except Exception as exc:  # noqa: BLE001 - the test reads it
                fits.append(f"{type(exc).__name__}: {exc}")
            else:
                fits.append("passed")
                break
    finally:
        (out / f"fits{sync.rank}.json").write_text(json.dumps(fits))
        sync.close()


def main() -> None:
    case, out = sys.argv[1], Path(sys.argv[2])
    if case in ("refit", "close"):
        failed_alone_then_skipped(case, out)
    elif case in ("retried", "retried_untold"):
        retried(out, told=case == "retried")
    elif case == "resumed":
        reverse = sys.argv[5:] == ["reversed"]
        resumed(out, Path(sys.argv[3]), int(sys.argv[4]), reverse)
    else:
        by_hand(case, out)


if __name__ == "__main__":
    main()
