"""A child's line over :data:`READ_PIECE`, read and passed on a piece at a time, never held
whole (:meth:`launcher.child.Child._copy_long` copies it): each piece is a line of its own on
the launcher's output, cut between UTF-8 characters (:func:`split_chars`), the later ones behind
:func:`continued_prefix`; the report's tail keeps its :func:`~launcher.failure.kept_line`
(:class:`~launcher.failure.KeptEnds`)."""

from __future__ import annotations

from .failure import KeptEnds

#: bytes of a line the pump reads at once: a longer one (an array of gigabytes) goes in pieces
READ_PIECE = 1 << 20


def continued_prefix(prefix: bytes, role: str) -> bytes:
    """The launcher's output's prefix of the pieces after the first of a line over
    :data:`READ_PIECE`: ``prefix`` with a ``+`` before its space (``[worker 0]+ ``), telling a
    piece of the child's last line from a line of its own. Where ``prefix`` is empty (mpiexec's)
    the ``role`` is named, ``[mpiexec]+ ``: a bare ``+ `` is how a rank's own lines may begin
    (a ``set -x`` trace), and could not be told from a piece."""
    bare = prefix.rstrip() or f"[{role}]".encode()
    return bare + b"+" + (prefix[len(prefix.rstrip()) :] or b" ")


def split_chars(data: bytes) -> tuple[bytes, bytes]:
    """``data`` as what ends on a whole UTF-8 character and the start of one that it cuts at
    its end (up to 3 bytes, held for the next piece of the line): ``data`` and ``b""`` where
    it ends on one, is not UTF-8 there, or is that start alone."""
    for back in range(1, min(4, len(data) - 1) + 1):
        byte = data[-back]
        if byte < 0x80 or byte > 0xF4:  # ASCII, or no UTF-8: nothing to hold
            break
        if byte >= 0xC2:  # the character's first byte: whole if its length fits
            size = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return (data[:-back], data[-back:]) if size > back else (data, b"")
    return data, b""


class LongLine:
    """One line over :data:`READ_PIECE`, given a piece at a time (:meth:`add`): what the
    report's tail keeps of it so far (:attr:`kept`) and each piece's line on the output."""

    def __init__(self, prefix: bytes, role: str) -> None:
        """``prefix``: the child's, before the first piece's output line; ``role``: the
        child's, named in the later pieces' prefix where ``prefix`` is empty."""
        self.kept = KeptEnds()
        self._prefix, self._continued = prefix, continued_prefix(prefix, role)
        self._held = b""  # the start of a character the last piece's end cut

    def add(self, piece: bytes) -> bytes:
        """Take the line's next piece (the last ends in its newline); its line on the output,
        ``b""`` where it has none (a bare newline after a piece that ended on a character)."""
        self.kept.add(piece)
        whole, self._held = split_chars(self._held + piece)  # a cut character: to the next
        if whole in (b"", b"\n"):
            return b""
        shown = self._prefix + whole + (b"" if piece.endswith(b"\n") else b"\n")
        self._prefix = self._continued
        return shown
