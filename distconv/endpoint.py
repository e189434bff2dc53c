"""``HOST:PORT`` as every address of a job is written: a shard's ``--bind``, ``--pservers``,
``DISTCONV_PSERVERS``. An IPv6 host is in brackets (``[::1]:5555``), or the port is
ambiguous: ``::1:80`` could be ``::1`` port 80 or ``::1:80`` with no port.
"""

from __future__ import annotations


def split_endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port); ValueError unless both are present, the host holds no
    whitespace or stray bracket, the port is ASCII digits under 65536 and an IPv6 host is in
    brackets (``::1:80`` could be ``::1`` port 80 or ``::1:80`` with no
    port; ``--bind ::1`` was read as host ``:``, port 1), as ``--pservers`` demands."""
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    name = host[1:-1] if bracketed else host
    # a port of ASCII digits ("٣" was port 3, "²" int()'s own words), a host that is a word
    # ("[]" was host "", "h h" reached ZeroMQ's "Invalid argument"), one pair of brackets
    if not (sep and name and port.isascii() and port.isdigit() and int(port) < 65536) or any(
        c.isspace() or c in "[]" for c in name
    ):
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    if ":" in name and not bracketed:
        raise ValueError(f"expected HOST:PORT, an IPv6 host in brackets ([::1]:80), got {text!r}")
    return name, int(port)


def join_endpoint(host: str, port: int | str) -> str:
    """``HOST:PORT``, an IPv6 literal in brackets (``[::1]:5555``), as :func:`split_endpoint`
    and ``--pservers`` read it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
