"""A script whose ranks run different jobs (each rank its own batch size), run through
``distconv.distributed.run_main``: the MPI and the parameter-server tests of its one line
(``tests/mpi/test_run_main_errors.py``, ``tests/sync/ps/test_ps_run_main_other_jobs.py``)."""

from __future__ import annotations

#: ``python OTHER_JOBS OUT_DIR``: every rank trains a small net with batch size 2 + its rank,
#: so each one's setup is refused (a JobRefused) under whichever transport ``init`` picks
OTHER_JOBS = """\
import sys
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network


def main():
    sync = dist.init("sgd", lr=0.01)
    try:
        net = Network()
        net.add("out", FullyConnected(4, 1), "x")
        net.add("loss", MSELoss(), ["out", "target"])
        rng = np.random.default_rng(0)
        data = {"x": rng.standard_normal((64, 4)), "target": rng.standard_normal((64, 1))}
        trainer = Trainer(net, sync, 2 + sync.rank, out_dir=sys.argv[1], progress=False)
        trainer.fit(data, epochs=1)
    finally:
        sync.close()


dist.run_main(main)
"""
