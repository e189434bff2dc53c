""":meth:`launcher.terminal.Terminal.close` leaves no child's line neither shown nor counted:
a pump that got room between the close's count and :meth:`~Terminal.shut` queued a
line behind the count that nothing wrote; and the lines dropped at a stall during the close's
wait were counted in no notice, its count, or :meth:`~Terminal.late`."""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from launcher.terminal import Terminal
from tests.launcher.real_children import wait_until

LINE = b"x" * 99 + b"\n"


class _Gated(io.BytesIO):
    """An output whose writes wait for :attr:`gate` (a reader that holds, then moves)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.entered = threading.Event(), threading.Event()

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.entered.set()
        self.gate.wait(10)
        return super().write(data)


def _notice(message: str) -> bytes:
    return f"distconv-launch: {message}\n".encode()


def _counted(said: str | None) -> int:
    """The lines of worker-0 that ``said`` (a close's or :meth:`Terminal.late`'s) counts."""
    found = None if said is None else re.search(r"lacks (\d+) line\(s\) of worker-0 ", said)
    return 0 if found is None else int(found[1])


def _held_view(
    log: Path, moved: Callable[[], None] | None = None
) -> tuple[_Gated, Terminal, threading.Thread]:
    """A view whose first write waits, its queue full, and a pump waiting for room
    (``moved``: its :meth:`Terminal.put`'s, called as each wait for room ends)."""
    out = _Gated()
    view = Terminal(out, _notice, bound=3 * len(LINE))
    assert view.put("worker-0", log, LINE)
    wait_until(out.entered.is_set, "the first write")
    assert view.put("worker-0", log, LINE) and view.put("worker-0", log, LINE)  # full
    pump = threading.Thread(target=view.put, args=("worker-0", log, LINE, moved))
    pump.start()
    pump.join(0.1)
    assert pump.is_alive()  # waiting for room
    return out, view, pump


@pytest.mark.timeout(30)
def test_a_line_that_gets_room_after_the_close_gave_up_is_counted(tmp_path: Path):
    """The pump woken (by the close's give-up, or a stall) looks again only once the output
    has moved (it queued its line behind the count whenever the host ran it that late,
    2 runs in 5 on a loaded host): its ``moved`` lets the lock go till then."""
    room, woke = threading.Event(), threading.Event()
    view: Terminal | None = None

    def late_pump() -> None:  # under the view's lock, as each wait for room ends
        assert view is not None
        view._ready.release()  # the host runs the pump late: the lock free
        try:
            woke.set()
            room.wait(10)
        finally:
            view._ready.acquire()

    out, view, pump = _held_view(tmp_path / "w.log", late_pump)
    said = view.close(0.2)  # given up (no stall yet): it counts what it holds
    out.gate.set()  # the output moves: room, after the count
    wait_until(lambda: view.pending() <= 2 * len(LINE), "room")
    room.set()
    pump.join(5)
    assert woke.is_set() and not pump.is_alive()
    assert _counted(said) + _counted(view.late()) == 4, (said, view.late())


@pytest.mark.timeout(30)
def test_the_lines_dropped_during_the_close_s_wait_are_counted(tmp_path: Path):
    out, view, pump = _held_view(tmp_path / "w.log")
    said = view.close(1.5)  # the stall (1 s) comes meanwhile: the pump's line dropped
    assert not pump.is_alive()
    assert _counted(said) == 4, said


@pytest.mark.timeout(30)
def test_the_lines_dropped_during_the_close_s_wait_are_said_where_the_output_ends(
    tmp_path: Path,
):
    out, view, pump = _held_view(tmp_path / "w.log")
    closing = threading.Thread(target=view.close, args=(10,))
    closing.start()
    pump.join(5)  # a stall (1 s) during the close's wait: the pump's line dropped
    assert not pump.is_alive()
    out.gate.set()  # the output moves: the writer takes the rest and ends
    closing.join(10)
    assert not closing.is_alive()
    shown = out.getvalue()
    assert shown.count(LINE) == 3
    assert b"1 line(s) of worker-0 not shown" in shown, shown[-300:]
