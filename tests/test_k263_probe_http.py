"""The probe server answers a request whose target is in absolute form, as HTTP demands."""

import socket

import pytest

from distconv.service import ServiceEndpoints


def _status(port: int, target: str) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(4096):
            data += chunk
    return int(data.split(b" ", 2)[1])


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "target, status",
    [
        ("/healthz", 200),
        ("http://127.0.0.1/healthz", 200),
        ("HTTP://example:9100/readyz?x=1", 503),
        ("http://127.0.0.1/metrics", 200),
        ("http://127.0.0.1/nope", 404),
        ("/nope?u=http://h/healthz", 404),
        ("http://[::1/healthz", 404),  # a target the URL parser refuses: no reply at all
    ],
)
def test_absolute_form_targets_are_answered_by_path(target, status):
    with ServiceEndpoints() as service:
        port = service.start()
        assert _status(port, target) == status
