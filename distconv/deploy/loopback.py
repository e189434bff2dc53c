"""Who reaches a server of a pod, read from the host it binds as its socket reads it: one on
loopback answers the pod itself only, never the kubelet's probes nor another pod; one an MPI
worker pod's liveness asks must answer on 127.0.0.1 (part of
:func:`distconv.deploy.check.manifest_problems`)."""

from __future__ import annotations

import ipaddress
import socket

#: the names of loopback the pod knows: localhost, and those of the kubelet's /etc/hosts
LOOPBACK_NAMES = ("localhost", "ip6-localhost", "ip6-loopback")


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _read(host: str) -> Address | str | None:
    """``host`` as a server's socket reads it: an address (``[::1]`` as ``::1``, an
    IPv4-mapped one as its IPv4, the C library's short and numeric forms ``127.1`` and
    ``2130706433``), a loopback name lower-cased (names are matched without regard to case),
    or None for another name, which is not judged."""
    host = host.strip("[]")  # as the servers bind it: [::1] is ::1, as URLs write it
    if host.lower() in LOOPBACK_NAMES:
        return host.lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 binds IPv4 loopback
    return address if mapped is None else mapped


def on_loopback(host: str) -> bool:
    """Whether a server bound on ``host`` answers on loopback only, read as the socket reads
    it: any address of 127.0.0.0/8 however written (``127.0.0.2``, ``127.1``), ``::1`` in any
    spelling or mapped from IPv4, in brackets or not, a loopback name in any case; another name
    is not judged."""
    address = _read(host)
    if isinstance(address, str):
        return True
    return address is not None and address.is_loopback


def answers_127_0_0_1(host: str) -> bool | None:
    """Whether a server bound on ``host`` answers a client that dials 127.0.0.1, as an MPI
    worker pod's liveness does: one on every interface (``0.0.0.0``, ``::``) or on 127.0.0.1
    however written (``localhost``, ``127.1``, ``::ffff:127.0.0.1``) does; one on another
    address (``127.0.0.2``, ``::1``, the pod's own) does not; None for a name not judged."""
    address = _read(host)
    if address is None or isinstance(address, str):  # localhost binds 127.0.0.1; the IPv6
        return None if address is None else address == "localhost"  # names none here
    return address.is_unspecified or address == ipaddress.IPv4Address("127.0.0.1")
