""":meth:`launcher.long_line.OutputPipe.end_line` is answered though the pipe never runs dry
(a process outside the child's group that holds it and prints without pause): the pump took
the pipe's data before the wake-up each time both were ready, so it never woke, and
:meth:`launcher.child.Child.finish` waited :data:`~launcher.child.OUTPUT_DRAIN_SECONDS` more
for nothing, the line under way left out of the report's tail."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from launcher.long_line import OutputPipe

#: prints lines without pause, faster than a Python reader splits them
CHATTY = "import os\nwhile True:\n    os.write(1, b'y\\n' * 32768)\n"


@pytest.mark.timeout(30)
def test_end_line_is_answered_though_the_pipe_never_runs_dry():
    chatty = subprocess.Popen([sys.executable, "-c", CHATTY], stdout=subprocess.PIPE)
    assert chatty.stdout is not None
    output = OutputPipe(chatty.stdout.fileno())
    read = [0]  # lines read: kept, they would fill the memory

    def count() -> None:  # as slow as a pump that writes each line: the writer keeps up
        for _ in output.pieces():
            read[0] += 1
            if read[0] % 1000 == 0:
                time.sleep(0.001)

    reader = threading.Thread(target=count, daemon=True)
    reader.start()
    try:
        while read[0] < 100_000:  # the pipe is full all the time by now
            assert reader.is_alive() and chatty.poll() is None
            time.sleep(0.01)
        assert output.end_line(2.0)
    finally:
        chatty.kill()
        chatty.wait()
        reader.join(10)
        chatty.stdout.close()
        output.close()
    assert not reader.is_alive()
