"""A link is read only where ``TCP_INFO`` has Linux's layout.

:class:`~distconv.sync.ps.links.Link` reads ``tcpi_last_data_recv`` and ``tcpi_bytes_acked`` at
Linux's offsets (52 and 120). FreeBSD has ``TCP_INFO`` too, with the same first fields but its
own from offset 100 on: at 120, the retransmitted and out-of-order packet counts, which grow
the most on a dead link, so that a shard gone with its host would read as taking bytes in.
Elsewhere than Linux the allowance per byte stays, as docs/protocol.md says. The platform is
stood in for (``sys.platform``) on a real connection on 127.0.0.1.
"""

from __future__ import annotations

import socket
import sys

import pytest

from distconv.sync.ps.links import Link

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a link's bytes are read with Linux's TCP_INFO"
)


@pytest.mark.timeout(30)
def test_a_link_on_another_system_s_tcp_info_reads_nothing(monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname(), timeout=10) as conn:
            accepted, _ = server.accept()
            with accepted:
                link = Link(conn.fileno())
                assert link.idle() is not None
                monkeypatch.setattr(sys, "platform", "freebsd14")
                assert link.idle() is None, "FreeBSD's fields read at Linux's offsets"
