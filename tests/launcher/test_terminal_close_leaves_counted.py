""":meth:`launcher.terminal.Terminal.close` that gives up on a slow output leaves none of the
children's lines it counted to be written after all: its writer went on, so lines
said missing ("it lacks N line(s) of worker-0 ...") were shown after the count, up to the
whole queue (4 MiB), ahead of the launcher's own last words, which the output's end then
waited for behind them."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.terminal import Terminal
from tests.launcher.real_children import GatedOutput, wait_until

LINE = b"x" * 99 + b"\n"


@pytest.mark.timeout(30)
def test_the_lines_a_close_counts_missing_are_not_written_after_it(tmp_path: Path):
    out, log = GatedOutput(), tmp_path / "worker-0.log"
    view = Terminal(out, lambda said: f"{said}\n".encode())
    assert view.put("worker-0", log, LINE)
    wait_until(out.entered.is_set, "the first write")  # under way: that line alone
    for _ in range(999):
        assert view.put("worker-0", log, LINE)
    assert view.say(b"the launcher's last words\n")
    said = view.close(0.2)  # gives up: the write under way has not ended
    assert said == (
        "the launcher's output did not take its last lines within 0.2 s (nothing reads it, or "
        f"too slowly), so it lacks 1000 line(s) of worker-0 ('{log}'): their logs have them"
    )
    out.gate.set()  # the output moves again: the writer goes on
    view._writer.join(10)
    assert not view._writer.is_alive()
    # the write under way at the count, then the launcher's own: no line of those counted
    assert out.written == [LINE, b"the launcher's last words\n"]  # was all 1000, then it
    assert view.pending() == 0
