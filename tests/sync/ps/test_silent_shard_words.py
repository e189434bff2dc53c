"""What a worker says while a shard it waits for is silent. A shard late to start kept its
workers silent for up to 1.5 x ``--timeout`` (90 s by default): a wait now says once, after a
few seconds, which shard it waits for. A ``--pservers`` name that does not resolve got the
generic "gone, stopped or unreachable; raise --timeout": the words now say the name does not
resolve. Real shard processes, real ZeroMQ sockets.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
from ps_helpers import insecure_worker, small_net

from distconv.straggler_words import NO_ANSWER_WHY
from distconv.sync.base import SyncError
from distconv.sync.ps.shard_silence import TELL_AFTER

#: a worker's timeout whose wait (1.5 x) outlasts TELL_AFTER and a late shard's start
TIMEOUT = 10.0
#: a name reserved never to resolve (RFC 2606)
NO_SUCH_HOST = "nosuchhost.invalid"


def silence_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "no answer yet" in r.getMessage()]


def unused_endpoint() -> str:
    """A HOST:PORT on 127.0.0.1 that nobody listens at once this returns: the late shard's."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.timeout(90)
def test_a_late_shard_is_named_once_while_the_worker_waits(shards, caplog):
    caplog.set_level(logging.WARNING, "distconv.pserver")
    endpoint = unused_endpoint()
    sync = insecure_worker([endpoint], timeout=TIMEOUT)
    failed: list[BaseException] = []

    def set_up() -> None:
        try:
            sync.setup(small_net().parameters())
        except BaseException as exc:  # reported below
            failed.append(exc)

    setup = threading.Thread(target=set_up, daemon=True)
    began = time.monotonic()
    try:
        setup.start()
        while not silence_lines(caplog) and time.monotonic() - began < TIMEOUT:
            time.sleep(0.1)
        told = time.monotonic() - began
        shards.start(1, 1, extra=["--bind", endpoint])
        setup.join(TIMEOUT * 2)
        assert not setup.is_alive() and not failed, failed
    finally:
        sync.close()
    want = (
        f"rank 0: waiting for pserver shard(s) 0 ({endpoint}): no answer yet to hello after "
        f"{TELL_AFTER:g} s (it waits up to {TIMEOUT * 1.5:g} s)"
    )
    assert silence_lines(caplog) == [want], caplog.text  # once, though the wait went on
    assert TELL_AFTER <= told < TELL_AFTER + 2, told


@pytest.mark.timeout(60)
def test_a_shard_name_that_does_not_resolve_is_said_so(caplog):
    caplog.set_level(logging.WARNING, "distconv.pserver")
    sync = insecure_worker([f"{NO_SUCH_HOST}:47100"], timeout=4)
    try:
        with pytest.raises(SyncError) as gave_up:
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    said = str(gave_up.value)
    unresolved = f"the host name '{NO_SUCH_HOST}' of shard 0 does not resolve (yet"
    assert said.startswith(f"rank 0: no answer to hello from pserver shard(s) 0 ({NO_SUCH_HOST}")
    assert unresolved in said and NO_ANSWER_WHY not in said, said
    assert [unresolved in line for line in silence_lines(caplog)] == [True], caplog.text
