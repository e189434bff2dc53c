"""Whether a host a pod's process listens on is loopback, read as its socket reads it: what
listens there answers the pod itself only, never the kubelet's probes nor another pod (part of
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
