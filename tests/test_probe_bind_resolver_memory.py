"""The resolver running out of memory as the probes look their host up names no flag, as a bind
that ran out of files, buffers or memory does (``service._flag_at_fault``): it said
``--health-host: ... Memory allocation failure``, sending the user to change a host that was
right. A name the resolver cannot find still names ``--health-host``."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from distconv import service as service_module
from distconv.job import _start_service

pytestmark = pytest.mark.timeout(10)


def _refused_by(error: OSError, monkeypatch) -> OSError:
    """What local rank 1's probes raise where making their server raises ``error``."""

    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(service_module, "ProbeHTTPServer", refuse)
    runtime = SimpleNamespace(role="worker", rank=1, local_rank=1)
    with pytest.raises(OSError) as refused:
        _start_service(8000, "probes.example", runtime)
    return refused.value


def test_the_resolver_out_of_memory_names_no_flag(monkeypatch):
    error = socket.gaierror(socket.EAI_MEMORY, "Memory allocation failure")
    refused = _refused_by(error, monkeypatch)
    said = "cannot bind probes and metrics on probes.example:8001: Memory allocation failure"
    assert str(refused) == said
    assert refused.errno == socket.EAI_MEMORY


def test_a_name_the_resolver_cannot_find_still_names_the_host_flag(monkeypatch):
    error = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    refused = _refused_by(error, monkeypatch)
    assert str(refused).startswith("--health-host: cannot bind probes and metrics on "), refused
