"""Who am I: role, rank, world size, local rank, job id, servers and keys, from flags or env.

One function, :func:`detect_runtime`, answers for every way a process can be started: by hand
with flags, by ``distconv-launch`` (our variables plus the torchrun names ``RANK``/
``WORLD_SIZE``/``LOCAL_RANK``), by OpenMPI's ``mpirun`` (``OMPI_COMM_WORLD_*``), by MPICH's Hydra
(``PMI_RANK``/``PMI_SIZE``/``MPI_LOCALRANKID``), or as a Kubernetes Indexed Job
(``JOB_COMPLETION_INDEX``, with the world size from ``DISTCONV_WORLD_SIZE``). A StatefulSet
ordinal in the host name (``pserver-3``) is read only with ``DISTCONV_RANK_FROM_HOSTNAME`` on
(``1``: any value but ``0``, ``false``, ``no``, ``off`` or blank, as ``DISTCONV_DEBUG``);
otherwise a machine called ``ci-runner-2`` would silently become rank 2.

Explicit flags override everything, silently. Two environment sources that are both present and
disagree are an error naming both: guessing which launcher is right would put two processes on
the same rank, which hangs the job instead of failing it.

Example::

    runtime = detect_runtime({"rank": args.rank, "world_size": args.world_size})
    runtime.log_prefix           # "[2/4]" for worker 2 of 4

Log lines that carry the rank come from :func:`distconv.logs.configure_logging`.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

from distconv.endpoint import join_endpoint, split_endpoint
from distconv.placement import (
    ENV_WORLD_SIZE,
    INTEGER_TEXT,
    Placement,
    from_environment,
    refuse_world_size_alone,
)
from distconv.placement import RuntimeConfigError as RuntimeConfigError  # caught from here

ROLES = ("worker", "server")
DEFAULT_JOB_ID = "local"

#: the variables distconv-launch sets for each child (and Kubernetes manifests set per pod)
ENV_ROLE = "DISTCONV_ROLE"
ENV_PSERVERS = "DISTCONV_PSERVERS"
ENV_JOB_ID = "DISTCONV_JOB_ID"
ENV_KEYS = "DISTCONV_KEYS"


@dataclass(frozen=True)
class Runtime:
    """This process's place in the job.

    Attributes:
        role: ``"worker"`` or ``"server"`` (a parameter-server shard).
        rank: 0-based index among processes of the same role.
        world_size: how many processes of this role take part.
        local_rank: index among this role's processes on the same host (picks the GPU).
        job_id: names the job in logs and checkpoint manifests, and to its shards.
        pservers: parameter-server shards as ``"host:port"``, in shard order.
        keys_dir: directory holding the job's CURVE key files, or None without encryption.
        keys_from_env: ``keys_dir`` came from ``DISTCONV_KEYS``, not a flag, so an explicit
            ``insecure`` overrides it (as a flag overrides any variable).
        source: which source gave rank and world size: ``"flags"``, ``"distconv"``,
            ``"openmpi"``, ``"pmi"``, ``"kubernetes"``, ``"hostname"`` or ``"default"``.
    """

    role: str = "worker"
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    job_id: str = DEFAULT_JOB_ID
    pservers: tuple[str, ...] = ()
    keys_dir: str | None = None
    source: str = "default"
    keys_from_env: bool = False

    @property
    def is_chief(self) -> bool:
        """True for the worker that writes files (rank 0); servers are never the chief."""
        return self.role == "worker" and self.rank == 0

    @property
    def log_prefix(self) -> str:
        """``"[2/4]"`` for worker 2 of 4 (``"[server 1/2]"`` for a shard); ``""`` when alone."""
        if self.world_size <= 1:
            return ""
        role = "server " if self.role == "server" else ""
        return f"[{role}{self.rank}/{self.world_size}]"


def detect_runtime(
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    hostname: str | None = None,
) -> Runtime:
    """Work out this process's runtime from explicit flags, then the environment.

    Args:
        flags: explicit settings; any of ``rank``, ``world_size``, ``local_rank``, ``role``,
            ``job_id``, ``pservers`` (comma-separated string or sequence) and ``keys_dir``.
            Keys whose value is None count as absent (argparse defaults).
        environ: the environment to read (default ``os.environ``).
        hostname: the host name, read only with ``DISTCONV_RANK_FROM_HOSTNAME=1``
            (default ``socket.gethostname()``).

    Returns:
        The validated :class:`Runtime`.

    Raises:
        RuntimeConfigError: two environment sources disagree, a variable is malformed, or the
            rank is out of range for the world size.
    """
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    env = os.environ if environ is None else environ
    unknown = set(flags) - _FLAG_KEYS
    if unknown:
        raise RuntimeConfigError(
            f"unknown runtime flag(s) {sorted(unknown)}; known: {sorted(_FLAG_KEYS)}"
        )
    role = _role(flags, env)
    placement = _placement(flags, env, hostname, role)
    # a blank one names no directory, as an empty one: not '  /worker-0.key_secret', nor a
    # clash with DISTCONV_INSECURE=1 (--keys '  ' is a usage error, train_flag_types.not_blank)
    env_keys = env.get(ENV_KEYS) or ""
    env_keys = env_keys if env_keys.strip() else ""
    if placement.source == "default" and role == "worker" and ENV_WORLD_SIZE in env:
        refuse_world_size_alone(env)
    runtime = Runtime(
        role=role,
        rank=placement.rank,
        world_size=placement.world_size,
        local_rank=placement.local_rank or 0,
        job_id=job_id_from(flags, env),
        pservers=_pservers(flags, env),
        keys_dir=str(flags.get("keys_dir") or env_keys or "") or None,
        source=placement.source,
        keys_from_env=not flags.get("keys_dir") and bool(env_keys),
    )
    _check_ranges(runtime, placement.describe())
    return runtime


_FLAG_KEYS = {"rank", "world_size", "local_rank", "role", "job_id", "pservers", "keys_dir"}
#: ``distconv train``'s flag for each key it has (:mod:`distconv.train_args`); messages name the
#: others (``local_rank``, ``role``: only ``flags=`` takes them) as the key of ``flags``
_TRAIN_FLAGS = {
    "rank": "--rank",
    "world_size": "--world-size",
    "pservers": "--pservers",
    "job_id": "--job-id",
}


def _flag_label(key: str) -> str:
    return _TRAIN_FLAGS.get(key, f"flags[{key!r}]")


def runtime_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The runtime flags of a parsed namespace (``distconv train``'s, :mod:`distconv.train_args`),
    for :func:`detect_runtime`: each None where the namespace has no such flag, or it was not
    given, which leaves the environment in charge."""
    return {key: getattr(args, key, None) for key in sorted(_FLAG_KEYS)}


def _placement(
    flags: Mapping[str, Any], env: Mapping[str, str], hostname: str | None, role: str
) -> Placement:
    """Rank and world size: flags over the one environment source (or agreeing sources)."""
    if "rank" in flags and "world_size" in flags:
        # flags override everything, so a broken or disagreeing environment does not matter
        found = None
    else:
        found = from_environment(env, hostname)
    if not any(k in flags for k in ("rank", "world_size", "local_rank")):
        return found or Placement("default", 0, 1, 0, "nothing set")
    base = found or Placement("default", 0, 1, None, "")
    rank = _flag_int(flags, "rank", base.rank)
    world = _flag_int(flags, "world_size", base.world_size)
    local = _flag_int(flags, "local_rank", base.local_rank)
    if found is None and "rank" not in flags and world > 1 and role == "worker":
        # every worker started so was rank 0: two took one rank, and the job waited for ever
        raise RuntimeConfigError(
            f"{_flag_label('world_size')} {world} says the job has {world} workers, but "
            "nothing says which one this is (no --rank, RANK, MPI rank or "
            "JOB_COMPLETION_INDEX): each would train as rank 0; give --rank too"
        )
    source = "flags" if ("rank" in flags or "world_size" in flags) else base.source
    names = f"rank={rank}, world_size={world}"
    if ("rank" in flags) != ("world_size" in flags):
        # one number from a flag, the other from the environment or the default: the message
        # said both were the flags' ("from rank=1, world_size=1 (flags)" where only
        # --world-size was given, or only --rank, the world size of 1 being the default's)
        env_key, flag_key = ("world_size", "rank") if "rank" in flags else ("rank", "world_size")
        value = {"rank": rank, "world_size": world}
        names = f"{env_key}={value[env_key]} ({base.source}) and {flag_key}={value[flag_key]}"
    return Placement(source, rank, world, local, names)


def _flag_int(flags: Mapping[str, Any], key: str, default: int | None) -> int | None:
    if key not in flags:
        return default
    value = flags[key]
    if isinstance(value, bool) or not (
        isinstance(value, Integral) or isinstance(value, str) and INTEGER_TEXT.fullmatch(value)
    ):
        raise RuntimeConfigError(f"{_flag_label(key)} must be an integer, got {value!r}")
    return int(value)


def _check_ranges(runtime: Runtime, where: str) -> None:
    if runtime.world_size < 1:
        raise RuntimeConfigError(
            f"world size must be at least 1, got {runtime.world_size} from {where}"
        )
    if not 0 <= runtime.rank < runtime.world_size:
        raise RuntimeConfigError(
            f"rank {runtime.rank} is out of range for world size {runtime.world_size} "
            f"(need 0 <= rank < world size), from {where}"
        )
    if not 0 <= runtime.local_rank < runtime.world_size:
        raise RuntimeConfigError(
            f"local rank {runtime.local_rank} is out of range for world size "
            f"{runtime.world_size}, from {where}"
        )


def _role(flags: Mapping[str, Any], env: Mapping[str, str]) -> str:
    role = str(flags.get("role") or env.get(ENV_ROLE) or "worker").strip().lower()
    if role not in ROLES:
        where = _flag_label("role") if flags.get("role") else ENV_ROLE  # whose value it is
        raise RuntimeConfigError(f"{where} must be one of {', '.join(ROLES)}, got {role!r}")
    return role


def job_id_from(flags: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The job id: ``flags["job_id"]`` unless empty, else ``DISTCONV_JOB_ID``, else the
    default, stripped (workers and shards alike, or every hello is refused).

    Raises:
        RuntimeConfigError: an id that is blank or holds whitespace.
    """
    given = str(flags.get("job_id") or env.get(ENV_JOB_ID) or DEFAULT_JOB_ID)
    job_id = given.strip()
    if not job_id or any(c.isspace() for c in job_id):
        # the value as given, and whose: the stripped one read "got ''" of --job-id '   '
        where = _flag_label("job_id") if flags.get("job_id") else ENV_JOB_ID
        raise RuntimeConfigError(f"{where}: job id must be a non-empty word, got {_quoted(given)}")
    return job_id


def _quoted(value: str) -> str:
    """``value`` quoted as given, and a blank one's length too: spaces are hard to count on a
    terminal, and a line of them reads as nothing given."""
    if value.strip():
        return repr(value)
    return f"{value!r} (only whitespace, {len(value)} character{'s' * (len(value) != 1)})"


def _pservers(flags: Mapping[str, Any], env: Mapping[str, str]) -> tuple[str, ...]:
    if "pservers" in flags:
        value, where = flags["pservers"], _flag_label("pservers")
    else:
        value, where = env.get(ENV_PSERVERS, ""), ENV_PSERVERS
    if isinstance(value, str) and not value.strip():
        return ()  # unset, or set to nothing: no servers
    items = value.split(",") if isinstance(value, str) else list(value)
    servers = tuple(str(item).strip() for item in items)
    if not all(servers):
        # " , " read as no servers at all, so the job trained without its shards in silence,
        # and "a:1,,b:2" lost its empty entry (a shard the user meant to name) without a word
        raise RuntimeConfigError(f"{where}: an empty entry in {value!r} (HOST:PORT,HOST:PORT)")
    for address in servers:
        check_address(address, where)
    refuse_repeated_servers(servers, where)
    return servers


def refuse_repeated_servers(servers: Sequence[str], where: str) -> None:
    """Each shard listed once: a repeat was taken as a second shard on the same server, and the
    job stopped only at the hello, in words about shard numbers. Also the worker's own check
    (``PServerSync(pservers=...)``, built without this module).

    Raises:
        RuntimeConfigError: naming the repeat and the entry it repeats, after ``where``.
        ValueError: an entry that is no ``HOST:PORT`` (:func:`~distconv.endpoint.split_endpoint`).
    """
    seen: dict[str, str] = {}
    for address in servers:
        same = _one_spelling(address)
        if same in seen:
            raise RuntimeConfigError(f"{where}: {address!r} repeats {seen[same]!r}")
        seen[same] = address


def _one_spelling(address: str) -> str:
    """``address`` spelled one way for each server: the port without leading zeros, a host
    name in lower case (DNS ignores case), an IP address in its short form (``[0:0::1]`` is
    ``[::1]``). Names are not resolved: a shard's DNS name may not exist yet when a job starts,
    and a shard named twice by two names (``localhost``, ``127.0.0.1``) is told at the hello."""
    host, port = split_endpoint(address)
    try:
        host = str(ipaddress.ip_address(host))  # an IPv6 zone (%eth0) keeps its case
    except ValueError:
        host = host.lower()
    return join_endpoint(host, port)


def check_address(address: str, where: str = "address") -> None:
    """Raise :class:`RuntimeConfigError` unless ``address`` is ``host:port`` (IPv6 in brackets).

    Args:
        address: the address to check.
        where: the flag or variable it came from, for the message.
    """
    try:
        port = split_endpoint(address)[1]
    except ValueError:
        port = 0  # a worker connects: port 0 (a shard's --bind to any free port) is no address
    if port == 0:
        raise RuntimeConfigError(f"{where}: {address!r} is not host:port (port 1-65535)")
