"""What a shard says of the address it listens on: one a worker can dial, and who can reach it.

``--bind`` names a host as the operator wrote it; ZeroMQ binds the address it stands for.
Three kinds of host differ from what a worker on another host must give in ``--pservers``:

- an interface's name (``--bind eth0:5555``): no worker can dial ``eth0``, so the shard prints
  the address bound in its place;
- a host name that resolves to a loopback address (Debian and Ubuntu map this host's own name
  to 127.0.1.1 in /etc/hosts): the shard serves this host alone. Printed as the name, it
  looked reachable from everywhere, and a worker elsewhere waited out its timeout to be told
  "unreachable"; so the shard prints the address, and warns;
- the wildcard (``0.0.0.0``, ``[::]``): every interface, but ``0.0.0.0`` is no address another
  host can dial, so the shard names this host's interface addresses.

An IP literal, loopback ones included, is printed as given and needs no word: the operator
chose it (``distconv-launch local`` binds 127.0.0.1 on purpose).
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from dataclasses import dataclass

from distconv.endpoint import join_endpoint
from distconv.sync.ps.config import is_interface

#: Linux's ioctl that reads an interface's IPv4 address (<linux/sockios.h>)
_SIOCGIFADDR = 0x8915
#: Linux's list of this host's IPv6 addresses: address, index, prefix, scope, flags, name
_IF_INET6 = "/proc/net/if_inet6"


@dataclass(frozen=True)
class BoundAddress:
    """A shard's listening address as it tells it.

    Attributes:
        endpoint: ``HOST:PORT`` to print, as ``--pservers`` names it on this host.
        warning: why workers on other hosts cannot reach it (a name that is loopback), or None.
        reach: the ``HOST:PORT`` workers on other hosts dial (bound to every interface), or
            None where ``endpoint`` says it.
    """

    endpoint: str
    warning: str | None = None
    reach: str | None = None


def bound_address(given: str, bound: str, port: int) -> BoundAddress:
    """What a shard bound to ``given`` (``--bind``'s host) says of ``bound`` (the address
    ZeroMQ bound, without brackets) and ``port``."""
    if is_interface(given):  # a worker cannot dial eth0: the address stands in its place
        return BoundAddress(join_endpoint(bound, port))
    address = _ip(bound)
    if _ip(given) is None and address is not None and address.is_loopback:
        # either family: an IPv6-only host's name (::1) has no IPv4 address to offer instead
        others = ", ".join(join_endpoint(a, port) for a in interface_addresses(ipv6=True))
        instead = f"; bind one of this host's addresses instead ({others})" if others else ""
        warning = (
            f"--bind {given} resolves to {bound}: loopback only: workers on other hosts "
            f"cannot reach it{instead}"
        )
        return BoundAddress(join_endpoint(bound, port), warning=warning)
    if address is not None and address.is_unspecified:
        return BoundAddress(join_endpoint(bound, port), reach=_reach(address, port))
    return BoundAddress(join_endpoint(given, port))


def _reach(wildcard: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    """Where workers on other hosts reach a shard on every interface: ``[::]`` takes IPv4
    peers too (dual-stack), ``0.0.0.0`` IPv4 ones only."""
    addresses = interface_addresses(ipv6=wildcard.version == 6)
    if not addresses:
        return "every interface of this host (their addresses could not be listed)"
    return ", ".join(join_endpoint(a, port) for a in addresses)


def interface_addresses(ipv6: bool) -> list[str]:
    """This host's interface addresses another host could dial: IPv4 ones, and with ``ipv6``
    the global IPv6 ones too; loopback and link-local ones (which need an interface's name
    to dial) left out. Empty where the platform lists none (this reads Linux's interfaces)."""
    found = _ipv4_addresses() + (_ipv6_addresses() if ipv6 else [])
    return [a for a in found if not ipaddress.ip_address(a).is_loopback]


def _ipv4_addresses() -> list[str]:
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return []
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for name in names:
            request = struct.pack("256s", name.encode()[:15])
            try:  # an interface without an IPv4 address answers EADDRNOTAVAIL
                reply = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request)
            except OSError:
                continue
            found.append(socket.inet_ntoa(reply[20:24]))  # struct ifreq's sin_addr
    return found


def _ipv6_addresses() -> list[str]:
    try:
        with open(_IF_INET6) as listing:
            rows = [line.split() for line in listing]
    except OSError:
        return []
    found = []
    for row in rows:
        if len(row) >= 4 and row[3] == "00":  # scope global: link-local needs %interface
            found.append(str(ipaddress.IPv6Address(bytes.fromhex(row[0]))))
    return found


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:  # a name
        return None
