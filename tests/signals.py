"""Children that take Ctrl-C as in a terminal, whatever the test run was started with.

A script's ``&`` and ``nohup`` start pytest with SIGINT ignored, and an ignored signal stays
ignored across ``exec``: a child would then rightly leave SIGINT alone, and a test of what
Ctrl-C does would fail for a reason that is not the code's.
"""

from __future__ import annotations

import signal


def sigint_as_in_a_terminal() -> None:
    """``preexec_fn`` for :class:`subprocess.Popen`: the child starts with SIGINT's default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
