"""A temporary resolver failure (``EAI_AGAIN``: no DNS server answered now) as the probes look
their host up names no flag: it said ``--health-host: ... Temporary failure in name
resolution``, sending the user to change a host that may be right.

No real look-up yields ``EAI_AGAIN`` on every machine (offline, a name is ``EAI_NONAME``; online,
it resolves), so the child's ``socket.socket.bind`` raises it for one host name, as the C
resolver does under ``bind`` (a ``sitecustomize`` in the child), and the real ``distconv
train`` reports it."""

from __future__ import annotations

import socket

import pytest

from tests.child_env import child_path
from tests.test_cli import SMALL, _assert_one_line_error, distconv
from tests.test_probe_bind_resolver_memory import _refused_by

pytestmark = pytest.mark.timeout(30)

HOST = "probes.example"
#: the child's resolver, out of answers for HOST alone
INJECT = f"""
import socket

_bind = socket.socket.bind


def _bind_again(self, address):
    if isinstance(address, tuple) and address[0] == {HOST!r}:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    return _bind(self, address)


socket.socket.bind = _bind_again
"""


def test_a_temporary_resolver_failure_names_no_flag_and_says_to_retry(monkeypatch):
    error = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    refused = _refused_by(error, monkeypatch)
    said = str(refused)
    assert said.startswith(f"cannot bind probes and metrics on {HOST}:8001: Temporary failure")
    assert "retry once name resolution (DNS) answers" in said and "--health" not in said
    assert refused.errno == socket.EAI_AGAIN


def test_distconv_train_says_the_lookup_failed_for_now_not_that_the_host_is_wrong(tmp_path):
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(INJECT)
    proc = distconv(
        "train", *SMALL, "--epochs", "1", "--out", str(tmp_path / "run"),
        "--health-port", "0", "--health-host", HOST,
        env={"PYTHONPATH": child_path(inject)}, timeout=25,
    )  # fmt: skip
    _assert_one_line_error(proc, f"cannot bind probes and metrics on {HOST}:0: Temporary failure")
    assert "--health-host" not in proc.stderr.splitlines()[-1], proc.stderr
    assert "retry" in proc.stderr.splitlines()[-1]
