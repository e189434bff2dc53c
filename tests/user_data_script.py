"""A user's script in the README's pattern (``try: fit finally: sync.close()`` inside
``dist.run_main(main)``) whose data or model is wrong, for the tests of how it ends, alone and
under ``mpiexec`` (``tests/test_run_main_user_errors.py``, ``tests/mpi/test_run_main_data.py``):

    python user_data_script.py CASE [RANKS [open]]

CASE: ``nan`` (a NaN pixel in row 5), ``empty`` (no example), ``lengths`` (600 images and 599
labels), ``label`` (a class 3 for 3 outputs in the last row: a DataError before the first
step), ``model`` (a layer of the user's own that raises a LayerError in its sixth forward: a
model error mid-epoch), ``feed`` (the images fed as ``image``, the network reads ``x``: a
NetworkError before the first step), ``float64`` (the images left float64: under MPI on one rank,
a difference of the ranks' feeds), ``float16`` (the model trained in float16, which a parameter
server refuses at setup), ``oserror`` (the script's own file missing), ``ok``.
RANKS, under MPI: the ranks whose data is wrong, ``0`` or ``all`` (the default). ``open``: the
sync is closed after fit returns, not in a ``finally`` (an error leaves it open, to MPISync's
abort hook)."""

import sys

import numpy as np

import distconv.distributed as dist
from distconv import Trainer
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.layers.errors import LayerError
from distconv.network import Network

BROKEN_AT = 6  # the forward of ``model``'s layer that fails: past fit's checks, mid-epoch


class Breaks(FullyConnected):
    """A user's layer with a bug that shows only in training: its sixth forward raises, on the
    ranks whose ``_breaks`` is set (a private name: every rank runs the same model)."""

    forwards, _breaks = 0, True

    def _forward(self, *inputs):
        self.forwards += 1
        if self._breaks and self.forwards == BROKEN_AT:
            raise LayerError(f"Breaks 'fc': forward {BROKEN_AT} failed")
        return super()._forward(*inputs)


def data(case: str) -> dict:
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 1, 2, 2)).astype(np.float32), rng.integers(0, 3, 64)
    if case == "nan":
        x[5, 0, 0, 0] = np.nan
    if case == "empty":
        x, y = x[:0], y[:0]
    if case == "lengths":
        y = y[:-1]
    if case == "label":
        y[-1] = 3
    if case == "float64":
        x = x.astype(np.float64)
    if case == "feed":
        return {"image": x, "label": y}
    if case == "oserror":
        np.load("no-such-file.npy")
    return {"x": x, "label": y}


def main() -> None:
    case, ranks = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "all"
    sync = dist.init("sgd", lr=0.1)
    if sys.argv[3:] == ["open"]:
        fit(sync, case, ranks)
        sync.close()
        return
    try:
        fit(sync, case, ranks)
    finally:
        sync.close()


def fit(sync, case: str, ranks: str) -> None:
    wrong = ranks == "all" or int(ranks) == sync.rank
    net = Network()
    fc = Breaks(4, 3) if case == "model" else FullyConnected(4, 3)
    fc._breaks = wrong
    net.add("fc", fc, "x")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    dtype = "float16" if case == "float16" and wrong else None
    Trainer(net, sync, 4, progress=False, dtype=dtype).fit(data(case if wrong else "ok"), epochs=1)


dist.run_main(main)
