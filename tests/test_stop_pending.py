"""The process-wide stop request (:func:`distconv.stop_request.pending`) ends with the fit's
handlers: a signal that lands while they are being put back leaves nothing pending, which a
later wait (an evaluation's prefetch, a fit on a rank thread that installs no handlers) would
take for a stop and cut short."""

from __future__ import annotations

import signal

from distconv import stop_request
from distconv.stop_request import StopRequest


def test_a_signal_while_the_handlers_go_back_leaves_no_stop_pending(monkeypatch):
    stop = StopRequest(announce=False)
    restore = stop.install()
    real = signal.signal

    def signal_lands_first(signum, handler):
        # our handler is still the one in place: a SIGTERM now runs it
        stop._on_signal(signal.SIGTERM, None)
        return real(signum, handler)

    monkeypatch.setattr(signal, "signal", signal_lands_first)
    try:
        restore()
    finally:
        monkeypatch.undo()
    assert signal.getsignal(signal.SIGTERM) is not stop._on_signal
    assert stop_request.pending() is None


def test_a_stop_is_pending_only_while_the_handlers_are_in_place():
    stop = StopRequest(announce=False)
    restore = stop.install()
    try:
        assert stop_request.pending() is None
        stop._on_signal(signal.SIGTERM, None)
        stop._on_signal(signal.SIGINT, None)
        signum, _ = stop_request.pending()
        assert signum == signal.SIGTERM  # the first one
    finally:
        restore()
    assert stop_request.pending() is None
