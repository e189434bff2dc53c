"""Whether a host an mpi launch names (in ``-H``, a hostfile or a batch system's host list) is
this machine, whose ranks start this host's own files: checked cheaply, with no DNS lookup
that can hang a launch.

A name is this host's when it is ``localhost``, this host's name (``socket.gethostname``, or
its first label), or its fully qualified name; an address when it is a loopback address or
the one this host's kernel picks as its own source for it (one of its interfaces'). An
address that names no single host (``0.0.0.0``, ``::``, multicast, broadcast) is none.
The fully qualified name may need a resolver, so it is looked up only for a name that starts
with this host's own first label, and for :data:`FQDN_BOUND` seconds at most.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import threading
from collections.abc import Iterable

#: seconds the lookup of this host's fully qualified name may take (a resolver that does not
#: answer would otherwise hold the launch for its own timeouts, often 5 s a try)
FQDN_BOUND = 0.5
#: names of this host that need no lookup
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_this_host(name: str) -> bool:
    """Whether the host ``name`` (a name or an address, ``[::1]`` too) is this machine."""
    name = name.strip().removeprefix("[").removesuffix("]").rstrip(".").lower()
    if not name:
        return False
    try:
        address = ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        return _is_this_name(name)
    if getattr(address, "ipv4_mapped", None) is not None:  # ::ffff:127.0.0.1 is 127.0.0.1
        address = address.ipv4_mapped
    if address.is_loopback:
        return True
    if address.is_unspecified or address.is_multicast or address == _BROADCAST:
        return False
    return _own_source(str(address), address.version)


def all_here(names: Iterable[str]) -> bool:
    """Whether every host of ``names`` is this machine (:func:`is_this_host`); True if none."""
    return all(is_this_host(name) for name in names)


def _is_this_name(name: str) -> bool:
    own = socket.gethostname().lower().rstrip(".")
    short = own.partition(".")[0]
    if name in LOCAL_NAMES or name in (own, short):
        return True
    # a fully qualified name of this host starts with its own first label: no other name
    # is worth a lookup (-H node1,node2 resolves nothing)
    return name.partition(".")[0] == short and name == _fqdn()


@functools.cache
def _fqdn() -> str | None:
    """This host's fully qualified name, or None where the lookup takes over
    :data:`FQDN_BOUND` seconds (it goes on in a daemon thread, which no exit waits for)."""
    found: list[str] = []
    lookup = threading.Thread(target=lambda: found.append(socket.getfqdn()), daemon=True)
    lookup.start()
    lookup.join(FQDN_BOUND)
    return found[0].lower().rstrip(".") if found else None


_BROADCAST = ipaddress.ip_address("255.255.255.255")


def _own_source(address: str, version: int) -> bool:
    """Whether ``address`` is one of this host's own: the source address the kernel picks to
    reach it is the address itself only then. A UDP connect only chooses a route, so no packet
    is sent. Binding the address is no test: with ``net.ipv4.ip_nonlocal_bind=1`` (keepalived
    and HAProxy nodes) any address binds."""
    family = socket.AF_INET if version == 4 else socket.AF_INET6
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((address, 9))
            return probe.getsockname()[0].partition("%")[0] == address
    except OSError:  # no route (ENETUNREACH), a broadcast (EACCES), no IPv6 here at all
        return False
