"""A stop in a fit's last steps on a real ``mpiexec -n 2`` job: the ranks agree on a stop every
8 steps, and at a fit's last step too, so a SIGTERM after the last multiple of 8 stops the fit
there, on every rank, with a checkpoint and status 143 (it used to end the fit as if no signal
came, status 0); and one that comes after that last check, in the fit's last evaluation, stops
the script's next fit instead of being forgotten there.

Run by ``mpiexec`` as ``python -m mpi4py tests/mpi/test_stop_last_steps.py OUT CASE``, this
module is also the ranks' script (:func:`main`): rank 0 signals itself, the ranks train
``small_lenet`` on 120 examples of :func:`trainer_data` (10 steps an epoch), and each writes
``OUT/rank<r>.json``: the step it stopped at, its ``Preempted``'s message and exit status (or
that it finished), then exits with that status, as the command line would.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from distconv.optim import create_optimizer
from distconv.sync.mpi import MPISync
from distconv.trainer import Trainer
from tests.mpi.common import (
    NEEDS_MPIEXEC,
    fit_and_exit,
    run_mpi,
    script,
    small_lenet,
    trainer_data,
)
from tests.signals import signal_at, signal_in_evaluation_after

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: a stop agreed at the fit's last step, step 20, not at step 16 (before the signal) or never
LAST_STEPS = "last-steps"
#: a stop a fit received after its last check, agreed at the next fit's first check, step 24
BETWEEN_FITS = "between-fits"


def _said(out: Path) -> list[dict[str, Any]]:
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]


def _stopped_at(step: int) -> list[dict[str, Any]]:
    """What the two ranks say after rank 0's SIGTERM stopped them after ``step``."""
    return [
        {"message": f"stopped by SIGTERM after step {step}", "status": 143, "step": step},
        {"message": f"stopped after step {step}: rank 0 got SIGTERM", "status": 143, "step": step},
    ]


def test_a_sigterm_after_a_fits_last_check_step_stops_every_rank_at_its_last_step(tmp_path):
    proc = run_mpi(["-n", "2", *script(Path(__file__).name), str(tmp_path), LAST_STEPS], 90)
    assert proc.returncode == 143, proc.stderr[-3000:]
    assert _said(tmp_path) == _stopped_at(20)  # signalled after step 17; 16 was the last check
    assert (tmp_path / "out" / "checkpoints" / "step-00000020.json").is_file()


def test_a_sigterm_during_a_fits_last_evaluation_stops_the_scripts_next_fit(tmp_path):
    proc = run_mpi(["-n", "2", *script(Path(__file__).name), str(tmp_path), BETWEEN_FITS], 90)
    assert proc.returncode == 143, proc.stderr[-3000:]
    # the first fit (epochs 1-2) ended whole; the next (epoch 3) stopped at its first check
    assert _said(tmp_path) == _stopped_at(24)
    assert (tmp_path / "out" / "checkpoints" / "step-00000024.json").is_file()


def main() -> None:
    """One rank of the job (see the module's docstring)."""
    out, case = Path(sys.argv[1]), sys.argv[2]
    sync = MPISync(create_optimizer("sgd", lr=0.01))
    trainer = Trainer(
        small_lenet(seed=0), sync, 6, out_dir=out / "out", progress=False, dtype="float64"
    )
    data = trainer_data(120)

    def fit() -> None:
        if case == LAST_STEPS:
            if sync.rank == 0:
                signal_at(trainer, 17, signal.SIGTERM)
            trainer.fit(data, epochs=2)
        else:
            if sync.rank == 0:
                signal_in_evaluation_after(trainer, 20)
            trainer.fit(data, trainer_data(24, seed=5), epochs=2)
            trainer.fit(data, epochs=3, resume=True)

    fit_and_exit(trainer, sync, out, fit)


if __name__ == "__main__":
    main()
