"""The hosts of ``distconv-launch mpi``: its ``--hostfile`` or its ``-H`` list.

Hostfiles are read in both formats (``host:slots`` as MPICH writes them, ``host slots=N`` as
OpenMPI does) and passed on as a host list (``h1:2,h2:2``, which Hydra's ``-hosts`` and
OpenMPI's ``-H`` both read), so either file works with either MPI.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from distconv.files import describe_os_error

from .commands import LaunchError
from .shown import shown

#: Open MPI's words for a host's slot count in a hostfile (``node slots=4``, ``count=4``,
#: ``cpu=4``: the same to its mpirun)
SLOT_KEYS = ("slots", "count", "cpu")
#: Open MPI's words for the most ranks a host takes oversubscribed: read, checked and not passed
#: on (the host list has no place for it), as every spelling its mpirun reads
MAX_KEYS = tuple(
    f"{a}{sep}{b}"
    for word in ("slots", "cpu", "count")
    for a, b in ((word, "max"), ("max", word))
    for sep in ("_", "-")
)


@dataclass(frozen=True)
class Host:
    """One line of a hostfile: a host and how many ranks it takes.

    ``stated`` is whether the slot count was written: a host alone on its line (or in ``-H``
    without ``:N``) takes 1, as MPICH counts it and as both MPIs read the host list they are
    given; Open MPI's own ``mpirun --hostfile`` would count the host's cores instead.
    """

    name: str
    slots: int = 1
    stated: bool = True


def read_hostfile(path: str) -> list[Host]:
    """Hosts from the hostfile at ``path`` (see :func:`parse_hostfile`).

    Raises:
        LaunchError: the file cannot be read (missing, a directory, no permission), naming
            ``--hostfile`` and why (it said ``[Errno 2] No such file or directory: 'PATH'``),
            is not UTF-8 text, or :func:`parse_hostfile` refuses it.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise LaunchError(
            f"--hostfile {shown(path)}: cannot read it: {describe_os_error(exc)}"
        ) from None
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (a Windows editor's) dropped
    except UnicodeDecodeError as exc:
        # a binary file passed by mistake: say so, not a traceback
        raise LaunchError(
            f"--hostfile {shown(path)}: not a text hostfile ({exc.reason} at byte {exc.start})"
        ) from None
    return parse_hostfile(text, where=f"--hostfile {shown(path)}")


def parse_hostfile(text: str, where: str = "hostfile") -> list[Host]:
    """Hosts from a hostfile in either format: ``host``, ``host:N`` or ``host slots=N``.

    Comments (``#``) and blank lines are skipped. Open MPI's spellings are read as its
    ``mpirun`` reads them: ``count=N`` and ``cpu=N`` are ``slots=N``, spaces may stand around
    ``=``, and its maximum (``max_slots=``, ``max-slots=``, ``slots_max=`` and the like:
    :data:`MAX_KEYS`) is checked and otherwise ignored. A host without a count takes 1
    (:class:`Host`).

    Raises:
        LaunchError: a line is neither format, gives its slot count twice or a maximum below
            it (which Open MPI refuses too); the message names the file and line.
    """
    hosts = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        first, *rest = line.split(None, 1)
        try:
            hosts.append(_host_line(_host_word(first), "".join(rest)))
        except ValueError as exc:
            raise LaunchError(f"{where} line {number}: {exc} in {shown(raw.strip())}") from None
    if not hosts:
        raise LaunchError(f"{where} names no hosts")
    return hosts


def _host_line(host: Host, rest: str) -> Host:
    """``host`` with the fields after it on its line (``slots=2 max_slots=4``) applied."""
    fields = re.sub(r"\s*=\s*", "=", rest.strip()).split()  # 'slots = 2' is 'slots=2'
    slots = maximum = None
    for word in fields:
        key, eq, value = word.partition("=")
        if not eq or key not in (*SLOT_KEYS, *MAX_KEYS):
            raise ValueError(f"unknown field {shown(word)}")
        if key in MAX_KEYS:
            maximum = _slots(value)
        elif slots is not None or host.stated:
            raise ValueError("the slot count is given twice")
        else:
            slots = _slots(value)
    if slots is not None:
        host = Host(host.name, slots)
    if maximum is not None and host.stated and maximum < host.slots:
        raise ValueError(f"the maximum {maximum} is less than the {host.slots} slots")
    return host


def parse_hosts(spec: str) -> list[Host]:
    """Hosts from ``-H h1:2,h2:2`` (a host without ``:N`` takes one rank).

    Raises:
        LaunchError: an entry is malformed.
    """
    try:
        hosts = [_host_word(word.strip()) for word in spec.split(",") if word.strip()]
    except ValueError as exc:
        raise LaunchError(f"-H {shown(spec)}: {exc}") from None
    if not hosts:
        raise LaunchError("-H names no hosts")
    return hosts


def _host_word(word: str) -> Host:
    name, colon, slots = word.rpartition(":")
    if not colon:
        return Host(word, 1, stated=False)
    if not name:
        raise ValueError(f"no host name in {shown(word)}")
    return Host(name, _slots(slots))


def _slots(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"slots must be a positive integer, got {shown(text)}")
    return int(text)


def hosts_arg(hosts: Sequence[Host]) -> str:
    """``h1:2,h2:2``, which both Hydra's ``-hosts`` and OpenMPI's ``-H`` read."""
    return ",".join(f"{h.name}:{h.slots}" for h in hosts)


def launch_hosts(args: argparse.Namespace) -> list[Host]:
    """The hosts the mpi launch ``args`` names: its ``--hostfile``'s, else its ``-H``'s, else
    none (mpiexec's own, or a batch system's).

    Raises:
        LaunchError: the hostfile cannot be read, or either refuses (:func:`read_hostfile`,
            :func:`parse_hosts`).
    """
    # None is the flag left out; a blank value is no host list (options.given refuses it)
    if args.hostfile is not None:
        return read_hostfile(args.hostfile)
    return parse_hosts(args.hosts) if args.hosts is not None else []
