"""What a rank of an Indexed Job reads of its placement, as it sees it: the launchers' rank and
size pairs and their local ranks (:data:`PAIRS`, :data:`LOCALS`), the Job's index
(``JOB_COMPLETION_INDEX``, filled in per pod by the kubelet), and the ``distconv train``
flags that place a rank instead.

The reading step of :mod:`distconv.deploy.check_index`, which judges what is read here, and
of :mod:`distconv.deploy.check_workers` and :mod:`distconv.deploy.check_ordinals`.
"""

from __future__ import annotations

from distconv.deploy.check_ranks import _as_read
from distconv.deploy.check_shards import env_as_seen
from distconv.deploy.shell import KUBELET_REFERENCE
from distconv.deploy.walk import (
    Manifest,
    _argv,
    _command_args,
    _flag,
    set_on_command_line,
    unset_on_command_line,
)
from distconv.runtime import INTEGER_TEXT

#: the launchers' pairs :func:`distconv.placement.from_environment` reads, in its order
PAIRS = (
    ("RANK", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
)
#: the local rank placement reads beside each pair's rank, where set (placement._triple)
LOCALS = {
    "RANK": "LOCAL_RANK",
    "OMPI_COMM_WORLD_RANK": "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK": "MPI_LOCALRANKID",
}
#: the Job index as a command line names it, filled in per pod by the kubelet
INDEX_NAME = "JOB_COMPLETION_INDEX"
INDEX = f"$({INDEX_NAME})"
#: what :func:`_seen` gives for a value that is each pod's index (the text ``INDEX`` a rank may
#: read as written is another value)
EACH_INDEX = "\0index"
#: why a reference left as written is no integer: the Job index; another name, or ``$$(...)``
_LEFT = f"the kubelet fills in {INDEX} only on the command line of an Indexed Job's pods"
_UNDEFINED = "the kubelet fills in only names defined before it ($$ is $): define it earlier"


def why_left(text: str) -> str:
    """`` (why)`` a value ``text`` a rank reads holds a ``$(`` left as written; empty if none."""
    return "" if "$(" not in text else f" ({_LEFT if INDEX in text else _UNDEFINED})"


#: (rank variable, size variable, rank, size) of a pair a rank sees; None: that one is unset
Pair = tuple[str, str, "str | None", "str | None"]


def _train_args(container: Manifest) -> list[str]:
    """The arguments of the ``distconv train`` of ``container``, as argparse reads them
    (abbreviated flags spelled out)."""
    return _as_read(_command_args(_argv(container), "train") or [])[0]


def placed_by(container: Manifest, *flags: str) -> bool:
    """Whether the ``distconv train`` of ``container`` gives one of ``flags``. With ``--rank``
    and ``--world-size`` a rank reads neither ``JOB_COMPLETION_INDEX`` nor
    ``DISTCONV_WORLD_SIZE``; with one, where no index is set, no ``DISTCONV_WORLD_SIZE``."""
    return _flag(_train_args(container), *flags) is not None


def _index_removed(container: Manifest) -> bool:
    """Whether the rank's command line starts it without the Job's ``JOB_COMPLETION_INDEX``
    (``env -i``, bash's ``exec -c``), setting none again."""
    name = INDEX_NAME
    return unset_on_command_line(container, name) and set_on_command_line(container, name) is None


def refused_alone(size: str) -> bool:
    """Whether a rank that nothing places (no index, no ``--rank``) refuses
    ``DISTCONV_WORLD_SIZE`` ``size`` at start: one above 1, or one it cannot read."""
    return not INTEGER_TEXT.fullmatch(size) or int(size) > 1


def _seen(container: Manifest, name: str, indexed: bool) -> tuple[bool, str | None]:
    """Variable ``name`` as the rank sees it (:func:`env_as_seen`): a reference left in its
    value is text the rank reads, but ``$(JOB_COMPLETION_INDEX)`` on the command line of an
    ``indexed`` Job's rank, the pod's index (:data:`EACH_INDEX`; with more around it, only the
    pod knows: ``(False, None)``). The Job controller adds the variable after the pod's env, so
    one of those that names it is left as written, as is one in a Job not Indexed
    (kubernetes#121523)."""
    known, value = env_as_seen(container, name)
    if value is None or "$(" not in value:
        return known, value
    written = set_on_command_line(container, name) if indexed else None
    defined = any(var.get("name") == INDEX_NAME for var in container.get("env", []))
    # findall gives "" for $$, a literal $
    if written is not None and not defined and INDEX_NAME in KUBELET_REFERENCE.findall(written):
        return (True, EACH_INDEX) if written.strip() == INDEX else (False, None)
    return True, value


def _pairs(container: Manifest, indexed: bool = True) -> list[Pair] | None:
    """The launchers' pairs the rank of an ``indexed`` Job (or another) sees, either variable
    set, in the order placement reads them; None where only the cluster knows whether one is
    set (a ``valueFrom``, an ``envFrom``)."""
    found = []
    for rank_var, size_var in PAIRS:
        (rank_known, rank), (size_known, size) = (
            _seen(container, rank_var, indexed),
            _seen(container, size_var, indexed),
        )
        if not (rank_known and size_known):
            return None
        if rank is not None or size is not None:
            found.append((rank_var, size_var, rank, size))
    return found
