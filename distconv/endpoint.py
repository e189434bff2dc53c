"""``HOST:PORT`` as every address of a job is written: a shard's ``--bind``, ``--pservers``,
``DISTCONV_PSERVERS``. An IPv6 host is in brackets (``[::1]:5555``), or the port is
ambiguous: ``::1:80`` could be ``::1`` port 80 or ``::1:80`` with no port.
"""

from __future__ import annotations


def split_endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port); ValueError unless both are present, the port is valid
    and an IPv6 host is in brackets (``::1:80`` could be ``::1`` port 80 or ``::1:80`` with no
    port; ``--bind ::1`` was read as host ``:``, port 1), as ``--pservers`` demands."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise ValueError(f"expected HOST:PORT, an IPv6 host in brackets ([::1]:80), got {text!r}")
    return host.strip("[]"), int(port)


def join_endpoint(host: str, port: int | str) -> str:
    """``HOST:PORT``, an IPv6 literal in brackets (``[::1]:5555``), as :func:`split_endpoint`
    and ``--pservers`` read it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
