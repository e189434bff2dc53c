"""Where this process sits in the job, as the environment says: each source of a rank and a
world size (:mod:`distconv.runtime` lists them), read, checked against the others, and the
error every runtime check raises.

``DISTCONV_WORLD_SIZE`` is read by the sources that have no size of their own (an Indexed
Job's index, a StatefulSet's ordinal) and must agree with the others where it is set beside
them: a manifest that says 4 beside a launcher that started 2 is named, not trained as 2.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from distconv.messages import env_switch

ENV_WORLD_SIZE = "DISTCONV_WORLD_SIZE"
ENV_RANK_FROM_HOSTNAME = "DISTCONV_RANK_FROM_HOSTNAME"

_HOST_ORDINAL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?-(\d+)$")


class RuntimeConfigError(ValueError):
    """The flags or the environment do not describe one consistent process.

    The message names the variables involved: both sources when two disagree, the variable and
    its value when one is malformed or out of range.
    """


@dataclass(frozen=True)
class Placement:
    """Rank, world size and (maybe) local rank as one source reported them."""

    source: str
    rank: int
    world_size: int
    local_rank: int | None
    names: str  # the variables read, for messages: "RANK=1, WORLD_SIZE=2"

    def describe(self) -> str:
        return f"{self.names} ({self.source})"


def from_environment(env: Mapping[str, str], hostname: str | None) -> Placement | None:
    """The placement every present environment source agrees on, or None when none is set."""
    found = [p for p in (reader(env, hostname) for reader in _READERS) if p is not None]
    for other in found[1:]:
        first = found[0]
        if (first.rank, first.world_size) != (other.rank, other.world_size) or (
            None not in (first.local_rank, other.local_rank)
            and first.local_rank != other.local_rank
        ):
            raise RuntimeConfigError(
                f"two sources disagree about this process's rank: {first.describe()} vs "
                f"{other.describe()}; unset one or pass --rank/--world-size explicitly"
            )
    if not found:
        return None
    # an agreeing source may know the local rank when the first does not (RANK without
    # LOCAL_RANK beside MPICH's MPI_LOCALRANKID)
    local = next((p.local_rank for p in found if p.local_rank is not None), None)
    first = found[0]
    _check_world_size_var(env, first)
    return Placement(first.source, first.rank, first.world_size, local, first.names)


def _triple(
    env: Mapping[str, str], source: str, rank_var: str, size_var: str, local_var: str
) -> Placement | None:
    """A source that names rank, size and (optionally) local rank in three variables."""
    if rank_var not in env and size_var not in env:
        return None
    for needed in (rank_var, size_var):
        if needed not in env:
            present = size_var if needed == rank_var else rank_var
            raise RuntimeConfigError(f"{present} is set but {needed} is not ({source})")
    rank = env_int(env, rank_var)
    world = env_int(env, size_var)
    local = env_int(env, local_var) if local_var in env else None
    names = f"{rank_var}={rank}, {size_var}={world}"
    return Placement(source, rank, world, local, names)


def _read_distconv(env: Mapping[str, str], hostname: str | None) -> Placement | None:
    return _triple(env, "distconv", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def _read_openmpi(env: Mapping[str, str], hostname: str | None) -> Placement | None:
    return _triple(
        env, "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"
    )


def _read_pmi(env: Mapping[str, str], hostname: str | None) -> Placement | None:
    return _triple(env, "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")


def _read_kubernetes(env: Mapping[str, str], hostname: str | None) -> Placement | None:
    """An Indexed Job pod: one process per pod, so the local rank is 0."""
    if "JOB_COMPLETION_INDEX" not in env:
        return None
    rank = env_int(env, "JOB_COMPLETION_INDEX")
    world = _world_size_var(env, f"JOB_COMPLETION_INDEX={rank}")
    return Placement("kubernetes", rank, world, 0, f"JOB_COMPLETION_INDEX={rank}")


def _read_hostname(env: Mapping[str, str], hostname: str | None) -> Placement | None:
    """A StatefulSet ordinal (``pserver-3``), only when asked for."""
    if not env_switch(ENV_RANK_FROM_HOSTNAME, env):  # "on" was read as off: 0 of 1, silently
        return None
    host = (hostname if hostname is not None else socket.gethostname()).split(".")[0]
    match = _HOST_ORDINAL.match(host)
    if match is None:
        raise RuntimeConfigError(
            f"{ENV_RANK_FROM_HOSTNAME}={env[ENV_RANK_FROM_HOSTNAME].strip()} but host name "
            f"{host!r} does not end in -<ordinal>"
        )
    rank = int(match.group(2))
    world = _world_size_var(env, f"host name {host!r}")
    return Placement("hostname", rank, world, 0, f"host name {host!r}")


#: environment sources in precedence order (the first present one names the source)
_READERS: Sequence[Callable[[Mapping[str, str], str | None], Placement | None]] = (
    _read_distconv,
    _read_openmpi,
    _read_pmi,
    _read_kubernetes,
    _read_hostname,
)


def _check_world_size_var(env: Mapping[str, str], placement: Placement) -> None:
    """``DISTCONV_WORLD_SIZE``, where set, says the size ``placement`` says: beside a source
    with a size of its own (a launcher's) it was never read, and a job of 4 the manifest said
    trained as the 2 ranks mpirun started, without a word."""
    if ENV_WORLD_SIZE in env and env_int(env, ENV_WORLD_SIZE) != placement.world_size:
        raise RuntimeConfigError(
            f"two sources disagree about the world size: {ENV_WORLD_SIZE}="
            f"{env_int(env, ENV_WORLD_SIZE)} vs {placement.describe()}; unset one or pass "
            "--rank/--world-size explicitly"
        )


def _world_size_var(env: Mapping[str, str], rank_from: str) -> int:
    if ENV_WORLD_SIZE not in env:
        raise RuntimeConfigError(
            f"the rank comes from {rank_from}, but {ENV_WORLD_SIZE} is not set to say how many "
            "workers there are"
        )
    return env_int(env, ENV_WORLD_SIZE)


def refuse_world_size_alone(env: Mapping[str, str]) -> None:
    """A world size above 1 with nothing that says which rank this is: the worker trained
    alone as rank 0 of 1, without a word (a StatefulSet's pod without the hostname switch)."""
    world = env_int(env, ENV_WORLD_SIZE)
    if world > 1:
        raise RuntimeConfigError(
            f"{ENV_WORLD_SIZE}={world} says the job has {world} workers, but nothing says "
            "which one this is (no --rank, RANK, MPI rank or JOB_COMPLETION_INDEX, and "
            f"{ENV_RANK_FROM_HOSTNAME} is off): alone it would train as rank 0 of 1"
        )


#: an integer as a launcher or a flag writes one: int() also reads "1_0" as 10 (a wrong rank)
INTEGER_TEXT = re.compile(r"\s*[-+]?[0-9]+\s*")


def env_int(env: Mapping[str, str], name: str) -> int:
    text = env[name]
    if not INTEGER_TEXT.fullmatch(text):
        raise RuntimeConfigError(f"{name} must be an integer, got {text!r}")
    return int(text)
