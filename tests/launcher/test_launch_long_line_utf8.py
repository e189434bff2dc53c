"""A long line's pieces on the launcher's output (:func:`launcher.child.continued_prefix`) are
cut between UTF-8 characters: a piece of :data:`launcher.child.READ_PIECE` bytes may end inside
one, which cut there showed as two U+FFFD, one on each output line, and lost the character."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from launcher.child import READ_PIECE, ChildSpec, continued_prefix
from launcher.kept_line import KEPT_LINE_BYTES, KeptEnds, kept_line
from launcher.long_line import LongLine, split_chars
from tests.launcher.real_children import output_lines

#: an odd ``a``, then 2-byte characters: every piece's end falls inside one; then a 3-byte and a
#: 4-byte one across the next cuts, and the line ends mid-character as the child dies
LINE = (
    "a" + "é" * (READ_PIECE // 2) + "€" * (READ_PIECE // 3 + 1) + "😀" * (READ_PIECE // 4)
).encode()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("end", [b"\n", b"\xf0\x9f"], ids=["newline", "dies-mid-character"])
def test_each_piece_of_a_long_line_is_whole_characters(tmp_path, end):
    line = LINE + end
    (tmp_path / "line").write_bytes(line)
    code = f"import os\nos.write(1, open({str(tmp_path / 'line')!r}, 'rb').read())\n"
    spec = ChildSpec("worker", 0, [sys.executable, "-c", code])
    lines, child = output_lines(tmp_path, spec, "w.log")
    assert len(lines) >= 4  # 3 MiB and 3 bytes, and a character's start where it dies
    assert lines[0].startswith(b"[worker 0] a")
    assert all(later.startswith(continued_prefix(b"[worker 0] ", "worker")) for later in lines[1:])
    pieces = [lines[0][len(b"[worker 0] ") :]]
    pieces += [later[len(b"[worker 0]+ ") :] for later in lines[1:]]
    assert b"".join(pieces) + b"\n" == line.rstrip(b"\n") + b"\n"
    for piece in pieces[: -1 if end != b"\n" else None]:
        piece.decode()  # strict: no character cut
    assert (tmp_path / "w.log").read_bytes() == line.rstrip(b"\n") + b"\n"
    assert list(child.tail) == [kept_line(line)]


@pytest.mark.parametrize(
    ("data", "kept"),
    [
        (b"ab\xc3", 2),
        (b"ab\xe2\x82", 2),
        (b"ab\xf0\x9f\x98", 2),
        (b"ab\xf0\x9f\x98\x80", 6),
        (b"ab\xc3\xa9", 4),
        (b"\xff\xfe\xfd\xfc", 4),  # no UTF-8: passed on as it is
        (b"ab\x80\x80\x80", 5),
        (b"\xc3", 1),  # nothing whole before it: passed on
    ],
)
def test_split_chars_holds_back_only_a_character_cut_at_the_end(data, kept):
    assert split_chars(data) == (data[:kept], data[kept:])


def test_a_piece_may_be_3_bytes_longer_than_read_piece_and_the_docs_say_so():
    """The start of a character held back from one piece leads the next: a piece that then
    ends on a character is longer than :data:`READ_PIECE` (the docs said only shorter)."""
    line = b"a" * (READ_PIECE - 3) + "😀".encode() + b"b" * (READ_PIECE - 1) + b"c\n"
    long_line = LongLine(b"[worker 0] ", "worker")
    shown = [long_line.add(line[at : at + READ_PIECE]) for at in range(0, len(line), READ_PIECE)]
    assert [len(piece) for piece in shown] == [
        len(b"[worker 0] ") + READ_PIECE - 3 + 1,
        len(b"[worker 0]+ ") + READ_PIECE + 3 + 1,
        len(b"[worker 0]+ ") + 2,
    ]
    docs = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    assert "each 1 MiB piece (give or take 3 bytes, so that no UTF-8 character is\ncut" in docs


#: the tail's mark of a cut, the count of its bytes in its group
CUT_MARK = re.compile(r"\[\.\.\. (\d+) bytes cut \.\.\.\]")


@pytest.mark.parametrize("char", ["é", "€", "😀"])
@pytest.mark.parametrize("shift", range(4))
def test_the_tails_kept_form_is_cut_between_characters(char, shift):
    """The tail's first and last halves of a line over :data:`KEPT_LINE_BYTES` were cut at a
    byte count: inside a character, which showed as U+FFFD at the mark, its bytes in no count."""
    line = b"a" * shift + char.encode() * (KEPT_LINE_BYTES // 2) + b"b" * (3 - shift)
    kept = kept_line(line + b"\n")
    assert "\ufffd" not in kept
    first, cut, last = (part.encode() for part in CUT_MARK.split(kept))
    assert first + last == line[: len(first)] + line[len(line) - len(last) :]
    assert len(first) + int(cut) + len(last) == len(line)
    ends = KeptEnds()
    for at in range(0, len(line) + 1, 4096):
        ends.add((line + b"\n")[at : at + 4096])
    assert ends.text() == kept


@pytest.mark.parametrize("char", ["é", "€", "😀"])
@pytest.mark.parametrize("escape", [b"\\", b"\\u"])
def test_a_cut_moved_off_an_escape_is_not_left_inside_a_character(char, escape):
    """The end's cut was moved off a UTF-8 character, then off an escape: where a backslash
    came just before a character (``C:\\été``), the move off the escape ended inside it."""
    rest = char.encode() * 10
    line = b"a" * 40000 + escape + rest + b"b" * (KEPT_LINE_BYTES // 2 - len(rest))
    kept = kept_line(line + b"\n")
    assert "\ufffd" not in kept
    first, cut, last = (part.encode() for part in CUT_MARK.split(kept))
    assert len(first) + int(cut) + len(last) == len(line)
    assert last == line[len(line) - len(last) :]
    ends = KeptEnds()
    for at in range(0, len(line) + 1, 4096):
        ends.add((line + b"\n")[at : at + 4096])
    assert ends.text() == kept
