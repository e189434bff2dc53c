""":meth:`launcher.terminal.Terminal.put` answers False to a pump that waited for room while
the output went: the writer's give-up (EPIPE, ``| head``; a full disk) empties the
queue, so the waiting pump found room, queued its line where no writer was left, and answered
True, against its word ("False where the output is gone, then nothing more is queued")."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import launcher.terminal
from launcher.terminal import Terminal
from tests.launcher.real_children import RecordingOutput, wait_until

LINE = b"x" * 99 + b"\n"


class _Goes(RecordingOutput):
    """An output whose first write waits for :attr:`gate`, then finds its reader gone."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.entered = threading.Event(), threading.Event()

    def hold(self, data: bytes) -> None:
        self.entered.set()
        self.gate.wait(10)
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.timeout(30)
def test_a_pump_waiting_for_room_when_the_output_goes_is_told_it_went(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(launcher.terminal, "OUTPUT_STALL_SECONDS", 30.0)  # no stall: it goes
    out, log = _Goes(), tmp_path / "w.log"
    view = Terminal(out, lambda said: f"{said}\n".encode(), bound=2 * len(LINE))
    assert view.put("worker-0", log, LINE)
    wait_until(out.entered.is_set, "the first write")
    assert view.put("worker-0", log, LINE)  # full
    answers: list[bool] = []
    pump = threading.Thread(target=lambda: answers.append(view.put("worker-0", log, LINE)))
    pump.start()
    wait_until(lambda: view._numbers.get("worker-0") == 3, "the pump's put")  # its number set
    with view._ready:  # under the lock from its number on, till it waits for room: waiting
        pass
    out.gate.set()  # the reader is gone: the writer gives up, the queue emptied
    pump.join(10)
    assert not pump.is_alive()
    assert answers == [False]
    assert view.pending() == 0  # nothing queued that no writer writes
