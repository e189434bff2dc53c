"""A stop signal's handler from before ours, as ``signal.signal()`` takes it back.

Its own module, importing nothing of distconv's: ``launcher.interrupt`` takes the stop signals
before numpy or the rest of distconv is imported, and gives them back with it too."""

from __future__ import annotations

import signal


def restorable(handler: object) -> object:
    """``handler``, a signal's before ours, as ``signal.signal()`` takes it back: None, one set
    outside Python (an embedding program's, before Python started), which Python cannot set
    again (``signal.signal(signum, None)`` raises TypeError), is the default's: the signal
    stops the process again, where ours would keep it for good."""
    return signal.SIG_DFL if handler is None else handler
