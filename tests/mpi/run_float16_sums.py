"""mpiexec -n 2 python -m mpi4py run_float16_sums.py GRAD_DTYPE OUT: the float16 model of
``tests/float16_sums.py`` on two ranks of 512 examples each, whose gradient sums overflow
float16 in the layers, before the wire. ``GRAD_DTYPE``: the wire's (``none``: the gradients'
own). Each rank writes what ``fit`` raised to ``OUT/rank<r>.err`` and closes its sync."""

from __future__ import annotations

import sys
from pathlib import Path

from distconv.optim import create_optimizer
from distconv.sync.mpi import MPISync
from tests.float16_sums import fit_float16


def main() -> None:
    wire, out = sys.argv[1], Path(sys.argv[2])
    grad_dtype = None if wire == "none" else wire
    sync = MPISync(create_optimizer("sgd", lr=1e-3), grad_dtype=grad_dtype)
    try:
        fit_float16(sync, out / "run")
    except Exception as exc:  # every rank raises alike: each says its own words
        (out / f"rank{sync.rank}.err").write_text(f"{type(exc).__name__}: {exc}")
    finally:
        sync.close()


if __name__ == "__main__":
    main()
