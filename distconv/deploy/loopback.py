"""Who reaches a server of a pod, read from the host it binds as its socket reads it: one on
loopback answers the pod itself only, never the kubelet's probes nor another pod; one an MPI
worker pod's liveness asks must answer on 127.0.0.1 (part of
:func:`distconv.deploy.check.manifest_problems`)."""

from __future__ import annotations

import ipaddress
import socket

#: the names of loopback the pod knows: localhost, and those of the kubelet's /etc/hosts
LOOPBACK_NAMES = ("localhost", "ip6-localhost", "ip6-loopback")


def on_loopback(host: str) -> bool:
    """Whether a server bound on ``host`` answers on loopback only, read as the socket reads
    it: any address of 127.0.0.0/8 however written (``127.0.0.2``, ``127.1``), ``::1`` in any
    spelling or mapped from IPv4, in brackets or not, a loopback name in any case; another name
    is not judged."""
    host = host.strip("[]")  # as the servers bind it: [::1] is ::1, as URLs write it
    if host.lower() in LOOPBACK_NAMES:  # names are matched without regard to case
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # the short and numeric forms the C library takes (127.1, 2130706433)
            return socket.inet_aton(host)[0] == 127
        except OSError:
            return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 binds IPv4 loopback
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def answers_127_0_0_1(host: str) -> bool | None:
    """Whether a server bound on ``host`` answers a client that dials 127.0.0.1, as an MPI
    worker pod's liveness does: one on every interface (``0.0.0.0``, ``::``) or on 127.0.0.1
    however written (``localhost``, ``127.1``, ``::ffff:127.0.0.1``) does; one on another
    address (``127.0.0.2``, ``::1``, the pod's own) does not; None for a name not judged."""
    host = host.strip("[]")
    if host.lower() in LOOPBACK_NAMES:  # localhost binds 127.0.0.1; the IPv6 names none here
        return host.lower() == "localhost"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # the short and numeric forms the C library takes
            return socket.inet_aton(host) in (bytes(4), bytes([127, 0, 0, 1]))
        except OSError:
            return None
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        address = mapped
    return address.is_unspecified or address == ipaddress.ip_address("127.0.0.1")
