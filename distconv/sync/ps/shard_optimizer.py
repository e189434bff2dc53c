"""Which optimizers the parameter server can run, and the words for one it cannot.

A shard rebuilds the workers' optimizer from its ``config()``, by name, from
:data:`distconv.optim.OPTIMIZERS` of the distconv it runs (``distconv pserver`` loads no
script), and updates each block of a parameter (1 MiB by default) alone. So a subclass of a
shipped optimizer that inherits its name trained the parent's rule there, silently; one a script
registered was refused by the shard with a traceback that did not say why; and a rule that
reads a whole parameter (a per-layer norm) trained differently once a parameter spans blocks.
Every rank refuses each at setup, before its hello (:func:`refuse_unservable`, called by
:class:`~distconv.sync.ps.client.PServerSync`'s layout; rank 0 looks again before it seeds
the shards), in one line, exit 1, checked against its own install's
:data:`~distconv.optim.INSTALLED_OPTIMIZERS`, which stands for the shards' (workers and shards
of one release); the launcher restarts none (the words begin with
:data:`~distconv.refused_starts.UNSERVABLE_OPTIMIZER`). A shard refuses a name its install
lacks as the job's configuration (:func:`~distconv.sync.ps.seeding.seed_optimizer`).
"""

from __future__ import annotations

from distconv import optim
from distconv.optim import Optimizer
from distconv.refused_starts import UNSERVABLE_OPTIMIZER
from distconv.sync.errors import JobRefused

#: what the shards build optimizers from, and the way to give them one of one's own
SHARD_REGISTRY = (
    "the shards build optimizers by name from distconv.optim.OPTIMIZERS of their own install "
    "(distconv pserver loads no script): add the class there, with a name of its own, and to "
    "distconv.names.OPTIMIZER_NAMES, on the distconv the shards run, and restart them"
)


def refuse_unservable(optimizer: Optimizer) -> None:
    """Raise :class:`~distconv.sync.errors.JobRefused` (one line under ``run_main``) where
    the shards would not run ``optimizer``'s own rule (see the module); local and MPI
    training run any optimizer object."""
    problem = unservable_problem(optimizer)
    if problem is not None:
        raise JobRefused(problem)


def unservable_problem(optimizer: Optimizer) -> str | None:
    """Why the shards would not run ``optimizer``'s rule, in one line; None where they do."""
    cls = type(optimizer)
    if not cls.elementwise:
        return (
            f"{_cannot_run(cls)}it is not element-wise (elementwise = False), and the shards cut "
            "each parameter into blocks (1 MiB by default) and update each block alone; train it "
            "with local or MPI sync"
        )
    name = optimizer.config()["name"]
    built = optim.INSTALLED_OPTIMIZERS.get(name)  # read now: a reload makes it anew
    if built is not None and _qualified(built) == _qualified(cls):  # the one that install
        return None  # builds, of this import of distconv.optim or one before a reload
    instead = (
        f"would build {_qualified(built)} instead"
        if built is not None
        else f"know no optimizer {name!r} (this process registered it)"
    )
    return (
        f"{_cannot_run(cls)}its shards rebuild it from its config by name {name!r} and "
        f"{instead}; {SHARD_REGISTRY}"
    )


def _cannot_run(cls: type) -> str:
    """The words each refusal begins with, which the launcher reads back as a start refused for
    good (:data:`~distconv.refused_starts.UNSERVABLE_OPTIMIZER`): no restart."""
    return UNSERVABLE_OPTIMIZER.format(optimizer=_qualified(cls))


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
