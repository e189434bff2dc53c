"""mpiexec -n 2 python -m mpi4py run_late_interrupt.py OUT WHERE: a SIGINT on rank 0 alone
(``os.kill`` of its own process) late in step 0's ``finish_step``, no communication thread
(unless ``WHERE`` starts with ``thread-``).

``WHERE`` is ``Allgather`` or ``Allgatherv`` (once that collective of the first step's
firing-order exchange returned on the job communicator: a Ctrl-C that came as rank 0 waited
there for rank 1), or ``pack`` (rank 0's first pack of ``b``'s bucket fails, as a failed device
copy would, and the SIGINT comes as ``finish_step``'s handler of that failure begins: once
it asked the step check for a Ctrl-C kept at ``start_step``), or ``reduce`` (once the step's
last pieces went, as ``finish_step`` calls ``update_step``). Only ``a`` fires, so both
buckets go in ``finish_step``. Each rank writes what its step raised to ``OUT/said<rank>.txt``
(``nothing`` where nothing was) and the ``repr`` of its context to ``OUT/context<rank>.txt``,
then closes its sync (:func:`~tests.mpi.common.recorded`): a close that aborts ends the job
with a status not 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

import distconv.sync.mpi.finishing as finishing  # finish_step's module
from tests.mpi.common import bucket_params, bucket_sync, recorded
from tests.mpi.run_check_interrupt import step, what_raises
from tests.mpi.run_pack_failure import fail_first_pack
from tests.mpi.run_start_interrupt import (
    context_noted,
    interrupted_after,
    interrupted_before,
)


def main() -> None:
    out, where = Path(sys.argv[1]), sys.argv[2]
    sync = bucket_sync(overlap=where.startswith("thread-"), timeout=3)
    where, params = where.removeprefix("thread-"), bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        if sync.rank == 0 and where == "pack":  # kept_over: the handler's alone
            fail_first_pack(sync, "b")
            sync._check.kept_over = interrupted_after(sync._check.kept_over)  # type: ignore[method-assign]
        elif sync.rank == 0 and where == "reduce":  # the last pieces gone, nothing reduced
            finishing.update_step = interrupted_before(finishing.update_step)
        elif sync.rank == 0:  # the watched job communicator's own, after setup's
            setattr(sync.comm, where, interrupted_after(getattr(sync.comm, where)))
        sync.start_step(1)
        said = what_raises(lambda: context_noted(out, sync.rank, step, sync, params[0]))
        (out / f"said{sync.rank}.txt").write_text(said)


if __name__ == "__main__":
    main()
