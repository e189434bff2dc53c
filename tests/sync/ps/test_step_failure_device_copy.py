"""A step that fails partway still moves the values it wrote to the device.

``PServerSync.finish_step`` writes each push reply into the host copy of a device parameter as
it arrives and moved the host copies to the device only after the last reply: a reply refused
(or a shard lost) after another's was written left the device values behind their host copies
until the next write of that parameter, which may never come. No test of ``tests/sync/ps`` has
a host-side stand-in for a device (``test_ps_gpu_host_copy.py`` needs cupy and a GPU), so here
a numpy subclass plays the device array: ``inbox``'s ``is_gpu_array``, ``to_host`` and
``copy_into`` are pointed at it, the rest of the path (host copies, the reply loop) is the
real one. Shard 1 is a real shard process whose push reply to the worker comes late and with
a values frame one byte short, so shard 0's reply is written first.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, shard_argv

from distconv.notes import notes_of
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.ps import inbox

#: ``python -m distconv`` whose push replies are late and one byte short
LATE_SHORT_SHARD = """
import sys, time
from distconv.cli import main
from distconv.sync.ps.server import Shard

reply = Shard._reply

def late_short(self, ident, request, arrays=(), error=None, **fields):
    if request.get("op") == "push" and arrays and not error:
        time.sleep(0.5)
        arrays = [*arrays[:-1], arrays[-1][:-1]]
    reply(self, ident, request, arrays, error, **fields)

Shard._reply = late_short
raise SystemExit(main(sys.argv[1:]))
"""


class DeviceArray(np.ndarray):
    """A stand-in for a cupy array: host memory that ``inbox`` takes for a device's."""

    def get(self) -> np.ndarray:
        return np.array(self)


@pytest.fixture
def device_stand_in(monkeypatch):
    monkeypatch.setattr(inbox, "is_gpu_array", lambda a: isinstance(a, DeviceArray))
    monkeypatch.setattr(inbox, "to_host", lambda a: np.array(a).view(np.ndarray))
    monkeypatch.setattr(inbox, "copy_into", lambda dst, src: np.copyto(dst, src))


def shard_command(shard: int, faulty: bool) -> list[str]:
    start = ["-c", LATE_SHORT_SHARD] if faulty else ["-m", "distconv"]
    return shard_argv(start, shard=shard, shards=2)


def fail_a_step(shards, tmp_path) -> tuple[list[Parameter], list[int], object]:
    """Parameters of "device" values, the indices of those on shard 0 alone, and the step's
    SyncError (shard 1's push reply refused after shard 0's was written, whose values the
    host copies hold)."""
    endpoints = [
        shards.launch(shard_command(s, s == 1), tmp_path / f"shard{s}.log") for s in range(2)
    ]
    params = [Parameter(f"w{i}", np.zeros(4).view(DeviceArray)) for i in range(4)]
    sync = insecure_worker(endpoints, lr=1.0, timeout=10)
    try:
        sync.setup(params)
        on_shard_0 = [
            i
            for i in range(len(params))
            if {sync.layout.shard_of[b.id] for b in sync.layout.blocks_of(i)} == {0}
        ]
        assert on_shard_0, "no parameter lies on shard 0 alone: the test proves nothing"
        sync.start_step(1)
        for p in params:
            p.grad[...] = 1.0
            sync.on_gradient(p)
        with pytest.raises(SyncError, match="malformed reply from a pserver") as raised:
            sync.finish_step()
        for i in on_shard_0:
            np.testing.assert_array_equal(sync._host[params[i].name], -1.0)  # the reply's
    finally:
        sync.close()
    return params, on_shard_0, raised.value


@pytest.mark.timeout(60)
def test_a_failed_step_leaves_the_device_holding_the_host_copies(shards, tmp_path, device_stand_in):
    params, on_shard_0, _ = fail_a_step(shards, tmp_path)
    for i in on_shard_0:
        np.testing.assert_array_equal(np.asarray(params[i].value), -1.0, params[i].name)


@pytest.mark.timeout(60)
def test_a_move_to_the_device_that_fails_then_does_not_hide_the_steps_error(
    shards, tmp_path, device_stand_in, monkeypatch, caplog
):
    """The move in the step's ``finally`` failing too (the device out of memory) raised its own
    error in place of the step's, which names the shard at fault."""

    def out_of_memory(dst, src):
        raise MemoryError("out of memory allocating 32 bytes")

    monkeypatch.setattr(inbox, "copy_into", out_of_memory)
    _, _, error = fail_a_step(shards, tmp_path)  # the SyncError, not the MemoryError
    assert "(pserver shard 1 (" in str(error), error
    moved = (
        "moving the values written to the device failed too: "
        "MemoryError('out of memory allocating 32 bytes')"
    )
    assert notes_of(error) == [moved]
    # a note only, on every Python: not logged as it is made
    logged = [r.getMessage() for r in caplog.records if moved in r.getMessage()]
    assert logged == [], caplog.text
