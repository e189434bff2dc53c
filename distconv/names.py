"""The names the command line offers for data sets, optimizers and transports, apart from
their code.

A command parses its arguments before it needs numpy, and ``distconv keys`` or
``check-manifests`` never need it; the modules that implement these names (:mod:`distconv.data`,
:mod:`distconv.optim`, :mod:`distconv.sync`) import numpy, which was over half of every
command's start. tests/test_names.py checks that the lists here and the implementations agree.
"""

from __future__ import annotations

#: the data sets :func:`distconv.data.load_dataset` reads
DATASET_NAMES = ("digits", "mnist", "synthetic")
#: the keys of :data:`distconv.optim.OPTIMIZERS`, sorted: add a new optimizer's name here too
#: (the places a new optimizer touches: :mod:`distconv.optim`'s docstring)
OPTIMIZER_NAMES = ("adagrad", "adam", "momentum", "nesterov", "rmsprop", "sgd")
#: the keys of :data:`distconv.sync.TRANSPORTS`
TRANSPORT_NAMES = ("local", "mpi", "pserver")
