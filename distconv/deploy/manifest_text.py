"""A manifest file's bytes as text, as kubectl reads them (part of ``distconv
check-manifests``, :mod:`distconv.deploy.check_command`): after a byte order mark in the
encoding it names, else UTF-8; and, where the text then cannot be read, the encoding its first
bytes look like where that is not UTF-8.
"""

from __future__ import annotations

import codecs
from typing import Any


class ManifestReadError(Exception):
    """A path the check cannot read, or that holds what kubectl apply refuses outright: the
    command exits 2 with this line."""


#: the byte order marks kubectl honours (golang.org/x/text's unicode.BOMOverride), each with
#: the codec of the text after it and its name in an error; none (the empty mark, last) is UTF-8.
#: UTF-32's, first (FF FE starts UTF-16's too), have no codec: kubectl reads no UTF-32
_MARKS = (
    *((mark, None, "UTF-32") for mark in (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16 (little-endian, as its byte order mark says)"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16 (big-endian, as its byte order mark says)"),
    (b"", "utf-8", "UTF-8"),
)

#: the encodings the first four bytes of text with no byte order mark show (the YAML 1.2
#: spec's table, section 5.2, as JSON's RFC 4627 section 3: the first character is ASCII, so
#: its zero bytes tell the width and order), UTF-32's first: ``x 00 00 00`` starts both
#: little-endian patterns. ``.`` is any byte but 00.
_LOOKS = (
    (b"\0\0\0.", "UTF-32 (big-endian)"),
    (b".\0\0\0", "UTF-32 (little-endian)"),
    (b"\0.", "UTF-16 (big-endian)"),
    (b".\0", "UTF-16 (little-endian)"),
)


def manifest_text(data: bytes) -> str:
    """``data`` as text, as kubectl reads a manifest: after a UTF-8 byte order mark, UTF-8;
    after a UTF-16 one (Windows' editors and PowerShell's ``>`` write it), UTF-16 in the
    mark's byte order; else UTF-8. After a UTF-32 one, refused by that name. Raises
    :class:`ManifestReadError`."""
    mark, codec, shown = next(found for found in _MARKS if data.startswith(found[0]))
    if codec is None:  # UTF-16 read its zeros: "YAML allows no character #x0000"
        raise ManifestReadError(f"{shown} text (its byte order mark): kubectl reads no {shown}")
    try:
        return data[len(mark) :].decode(codec)
    except UnicodeDecodeError as exc:
        at = len(mark) + exc.start + 1
        raise ManifestReadError(f"byte {at} is no {shown} text: {exc.reason}") from None


def unmarked_encoding(data: bytes) -> str:
    """Where ``data`` has no byte order mark and its first bytes look like UTF-16 or UTF-32
    (:data:`_LOOKS`), what to say before its error (which is then ``YAML allows no character
    #x0000`` or a byte that is no UTF-8): the encoding it looks like, which kubectl reads as
    UTF-8. Empty otherwise: a guess is only added to an error, never taken to read the text
    (NUL is in no YAML or JSON text, so text that looks so is refused whatever it is)."""
    if any(data.startswith(mark) for mark, codec, _ in _MARKS if mark):
        return ""
    head = bytes(byte if byte == 0 else ord(".") for byte in data[:4])
    for look, shown in _LOOKS:
        if head.startswith(look):
            return f"{shown} text with no byte order mark, by its first bytes, read as UTF-8: "
    return ""


def yaml_error(exc: Any) -> str:
    """A YAML error in one line: where, then what (\"while scanning ...; could not find ...\")."""
    mark = exc.problem_mark or exc.context_mark
    what = "; ".join(filter(None, (exc.context, exc.problem))) or "cannot be read"
    return f"line {mark.line + 1}, column {mark.column + 1}: {what}" if mark else what


def unprintable_at(text: str, exc: Any) -> str:
    """Where the character YAML refuses is, by line and column (libyaml counts its offset in
    bytes, PyYAML's own reader in characters, and each words it its own way)."""
    at = text.find(chr(exc.character))
    line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
    return f"line {line}, column {column}: YAML allows no character #x{exc.character:04x}"
