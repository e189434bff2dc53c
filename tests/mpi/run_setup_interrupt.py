"""mpiexec -n 2 python -m mpi4py run_setup_interrupt.py OUT: rank 0 gets a SIGINT (``os.kill``
of its own process, as a terminal's Ctrl-C is) inside ``MPISync.setup``, between two of its
collectives, in no meeting's hold: first as the base setup calls ``broadcast_parameters``
(the job check made), then, in a second setup, as the gradients' communicator is duplicated
(``Comm.Dup``, a collective; the broadcast made). Each rank writes what each setup raised to
``OUT/setup<rank>.txt`` (one line each, ``nothing`` where nothing was), takes one step
(:func:`~tests.mpi.common.step_and_save`) and closes (:func:`~tests.mpi.common.recorded`): a
close that aborts ends the job with a status not 0.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import distconv.sync.mpi.sync as sync_module
from tests.mpi.common import bucket_params, bucket_sync, recorded, step_and_save
from tests.mpi.run_check_interrupt import what_raises


def interrupted_first(call: Callable[..., Any]) -> Callable[..., Any]:
    """``call``, a SIGINT sent to this process as it is made, before any of its work."""

    def sent_first(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)  # its handler runs before call: outside any hold
        return call(*args, **kwargs)

    return sent_first


def main() -> None:
    out = Path(sys.argv[1])
    sync, params = bucket_sync(timeout=3), bucket_params()
    said = []
    with recorded(sync, out):
        if sync.rank == 0:
            sync.broadcast_parameters = interrupted_first(sync.broadcast_parameters)
        said.append(what_raises(lambda: sync.setup(params, {})))
        if sync.rank == 0:
            del sync.broadcast_parameters
            sync_module.duplicate = interrupted_first(sync_module.duplicate)
        said.append(what_raises(lambda: sync.setup(params, {})))
        (out / f"setup{sync.rank}.txt").write_text("\n".join(said))
        step_and_save(sync, params, out)


if __name__ == "__main__":
    main()
