"""A bounded log for lines a peer can repeat at will: a few in full, then only a count.

A worker logs the replies of a shard that answer nothing it awaits (:mod:`.intake`), and a shard
the requests it refuses (:mod:`.request_log`); either peer can send thousands a second, a bug's
loop or an attack, and a line each filled the disk. :class:`LogTally` is the rule both apply to
one source of such lines: at most ``lines`` in full per ``window`` seconds (a token bucket whose
room refills at that rate, up to ``lines``), the others only by their count at each power of
ten. A trickle slower than the rate is logged whole, and leaves a later burst's first lines
shown in full.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LogTally:
    """One source's lines, for a log that stays bounded: ``room`` for lines in full, refilled at
    ``lines`` per ``window`` seconds (as of ``at``) up to ``lines``, and ``unshown``, those not
    logged since the latest line in full.

    Args:
        at: when the tally starts (``time.monotonic()``), full.
        lines: the lines in full per ``window``.
        window: the seconds in which ``lines`` lines in full come back.
    """

    at: float
    lines: int = 5
    window: float = 60.0
    room: float = field(init=False)
    unshown: int = 0

    def __post_init__(self) -> None:
        self.room = float(self.lines)

    def admit(self, now: float) -> bool:
        """Whether a line of ``now`` is logged in full (else counted in ``unshown``)."""
        refill = (now - self.at) * self.lines / self.window
        self.room, self.at = min(float(self.lines), self.room + refill), now
        if self.room >= 1.0:
            self.room -= 1.0
            return True
        self.unshown += 1
        return False

    def take_unshown(self) -> int:
        """The lines not logged before the one admitted now, counted afresh from 0."""
        unshown, self.unshown = self.unshown, 0
        return unshown

    def count_due(self) -> bool:
        """Whether the count of those not logged is due in the log: at each power of ten."""
        return 10 ** (len(str(self.unshown)) - 1) == self.unshown
