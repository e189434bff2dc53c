"""A line of a child's output as its tail keeps it, bounded (:func:`kept_line`, :class:`KeptEnds`):
the failure report's tail and what the launcher reads of a child's end, from
:mod:`launcher.failure` (re-exported there)."""

from __future__ import annotations

import re

#: bytes of one output line that a child's tail keeps: a longer line (a rank dumping an array)
#: keeps its first and last halves of that around a mark of the cut, so that the launcher's
#: memory is bounded (mpiexec keeps 1,024 lines, up to three times over) whatever the lines'
#: length; mpiexec's statuses and a rank's reason are far shorter. The log keeps lines whole.
KEPT_LINE_BYTES = 64 * 1024


def kept_line(line: bytes) -> str:
    """``line``, its newline stripped, as a child's tail keeps it: whole up to
    :data:`KEPT_LINE_BYTES`, else its start and its end (where a rank's reason says how it
    ends the job) around ``[... N bytes cut ...]``, neither cut inside a JSON string's escape
    (a rank's reason under ``--log-format json`` is still a JSON object) nor inside a UTF-8
    character (which would show as U+FFFD)."""
    line = line.rstrip(b"\n")
    if len(line) <= KEPT_LINE_BYTES:
        return line.decode(errors="replace")
    return _kept(line, line, len(line))


_HALF = KEPT_LINE_BYTES // 2
_BACKSLASH = ord("\\")


def _kept(start: bytes, end: bytes, size: int) -> str:
    """The first and last :data:`_HALF` bytes of a line of ``size`` bytes around the mark of
    the bytes cut between them, from its ``start`` and ``end`` (the whole line, or what
    :class:`KeptEnds` keeps of it), each cut moved off a UTF-8 character and an escape (the
    start's back, the end's forward)."""
    head, tail = _cut_place(start, _HALF, -1), _cut_place(end, len(end) - _HALF, 1)
    cut = size - head - (len(end) - tail)
    first, last = (part.decode(errors="replace") for part in (start[:head], end[tail:]))
    return f"{first}[... {cut} bytes cut ...]{last}"


def _cut_place(data: bytes, at: int, step: int) -> int:
    """``at``, or the nearest place ``step`` (-1 back, 1 forward) from it where a cut splits
    neither a UTF-8 character nor a JSON escape. The two moves alternate until neither moves:
    a move off an escape can land inside a character (``\\é``, a backslash in a Windows path
    before an accented letter: the escape's end is the ``é``'s second byte)."""
    while True:
        place = _char_start(data, at, step)
        while 0 < place < len(data) and _in_escape(data, place):
            place += step
        if place == at:
            return at
        at = place


def _char_start(data: bytes, at: int, step: int) -> int:
    """``at``, or the nearest place ``step`` (-1 back, 1 forward) from it, up to 3 bytes, that
    is no UTF-8 continuation byte (0x80-0xBF): a cut there splits no character."""
    for moved in range(4):
        place = at + step * moved
        if not 0 <= place < len(data) or not 0x80 <= data[place] < 0xC0:
            return max(place, 0)
    return at  # no UTF-8 there: cut where it falls


class KeptEnds:
    """What :func:`kept_line` keeps of a line read in pieces (the pump never holds a line over
    :data:`launcher.child.READ_PIECE` whole): its first and last bytes, and how many, with
    the few bytes around each cut that say whether it falls inside an escape."""

    #: bytes kept past each half: whether a cut falls inside an escape (6 bytes each way)
    _AROUND = 64

    def __init__(self) -> None:
        self._start = self._end = b""
        self._size = 0
        self._run = 0  # backslashes ending what came before _end: whether its first escapes

    def add(self, piece: bytes) -> None:
        """The line's next piece (the last ends in its newline, or is the last read)."""
        self._size += len(piece)
        keep = _HALF + self._AROUND
        if len(self._start) < keep:
            self._start += piece[: keep - len(self._start)]
        joined = self._end + piece  # a copy of the piece: cheap beside reading it
        cut = len(joined) - keep - 1  # with the newline, stripped in text()
        if cut > 0:
            run = cut - len(joined[:cut].rstrip(b"\\"))
            self._run = self._run + run if run == cut else run
            joined = joined[cut:]
        self._end = joined

    def text(self) -> str:
        """:func:`kept_line` of the whole line, which is over :data:`KEPT_LINE_BYTES`."""
        end = self._end.rstrip(b"\n")
        size = self._size - (len(self._end) - len(end))
        return _kept(self._start, b"\\" * (self._run % 2) + end, size)  # the run's parity


#: a JSON escape of the first and of the second half of a surrogate pair (a character past
#: U+FFFF, as an emoji, is the two: ``\\ud83d\\ude00``)
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_LOW_SURROGATE = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _in_escape(data: bytes, at: int) -> bool:
    """Whether a cut before ``data[at]`` falls inside a JSON escape (``\\"``, ``\\u00e9``):
    after an escaping backslash, within the four digits after its ``u``, or between the two
    escapes of a surrogate pair (either half alone decodes to a lone surrogate, which no
    UTF-8 output can write)."""
    if at >= 6 and _LOW_SURROGATE.match(data, at) and _HIGH_SURROGATE.fullmatch(data, at - 6, at):
        return _escaping(data, at - 6)
    for back in range(1, 6):
        mark = at - back
        if mark < 0:
            return False
        if data[mark] == _BACKSLASH and _escaping(data, mark):
            return back == 1 or data[mark + 1] == ord("u")
    return False


def _escaping(data: bytes, at: int) -> bool:
    """Whether the backslash ``data[at]`` begins an escape: it ends an odd run of them. The
    run is measured by ``bytes.rstrip`` on pieces that double from 64 bytes (a line can be one
    run of millions, which a byte at a time in Python took seconds over)."""
    end, piece = at + 1, 64
    while True:
        start = max(end - piece, 0)
        before = len(data[start:end].rstrip(b"\\"))  # bytes of the piece before the run
        if before or start == 0:
            return (at + 1 - start - before) % 2 == 1
        end, piece = start, piece * 2
