"""mpiexec -n 2 python -m mpi4py run_wire_overflow.py OVERLAP ERRORS_DIR [caught|run_main]: a
16-bit wire whose sum overflows.

Each rank holds one float64 parameter and one example whose gradient, averaged over the step's
two examples, is 40,000: finite in float16 on each rank, but the ranks' sum (80,000) is past
float16's largest value (65,504). Each rank writes what ``finish_step`` raised and its
parameter's values after it to ``ERRORS_DIR/rank<r>.err`` and ``rank<r>.npy``, then raises: the
sync's ``close`` ends the job. ``caught``: the error is not raised, the sync closed after it (a
close that aborts ends the job with a status not 0). ``run_main``: ``main`` is run through
``distconv.distributed.run_main`` (start it without ``-m mpi4py``, whose runner aborts on any
exit status but 0), the sync closed in its ``finally`` as the README's script does; and the
last value's average is past float16's range on each rank alone, with opposite signs (200,000
and -200,000 summed over the step: +inf and -inf on the wire, NaN summed), refused alike.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from distconv.distributed import run_main
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync


def main() -> None:
    overlap, errors, caught = sys.argv[1] == "1", Path(sys.argv[2]), sys.argv[3:] == ["caught"]
    param = Parameter("w", np.array([1.0, -1.0, 0.5]))
    sync = MPISync(create_optimizer("sgd"), grad_dtype="float16", overlap=overlap)
    try:
        sync.setup([param], {})
        sync.start_step(1)
        signs = sys.argv[3:] == ["run_main"]  # each rank's inf, of opposite signs
        param.grad += np.array([80_000.0, 1.0, (-1.0) ** sync.rank * 200_000 if signs else -1.0])
        sync(param)
        sync.finish_step()
    except Exception as error:
        (errors / f"rank{sync.rank}.err").write_text(f"{type(error).__name__}: {error}\n")
        np.save(errors / f"rank{sync.rank}.npy", param.value)
        if not caught:
            raise
    finally:
        sync.close()


if __name__ == "__main__":
    run_main(main) if sys.argv[3:] == ["run_main"] else main()
