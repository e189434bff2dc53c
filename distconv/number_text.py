"""How every distconv command line (``distconv train``, ``distconv pserver``, ``distconv keys``,
``distconv-launch``) reads a number from a flag: as an operator writes one, in ASCII digits.

``int()`` and ``float()`` read more than that: ``1_0`` as 10 (Python's digit grouping), the
Arabic-Indic ``١٠`` as 10 too, and ``float()`` also ``nan``, ``inf`` and ``infinity``. Integer
flags were held to :data:`~distconv.runtime.INTEGER_TEXT`, but decimal ones still went through
``float()``: ``--grace 1_0`` waited 10 seconds and ``--lr ٣`` trained at 3, without a word.

Imports nothing heavy: the launcher reads its flags with it.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from numbers import Integral, Real

from distconv.runtime import INTEGER_TEXT

#: a decimal number as written: ASCII digits with at most one point (``5.``, ``.5``), an
#: optional sign and exponent (``+1e-3``); no ``_``, no other scripts' digits, no nan or inf
DECIMAL_TEXT = re.compile(r"\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*")
#: what float() reads as no finite number: told apart, to say why it is refused
_NOT_FINITE = re.compile(r"\s*[-+]?(nan|inf|infinity)\s*", re.IGNORECASE)


def number(text: str | float, kind: type) -> int | float:
    """``kind(text)`` (``int`` or ``float``) for a number written as
    :data:`~distconv.runtime.INTEGER_TEXT` or :data:`DECIMAL_TEXT` say, or passed by a Python
    caller as a number already (``positive_float(0.01)``; not ``True``, nor ``2.5`` for an int).

    Raises:
        argparse.ArgumentTypeError: the one-line usage error argparse prints for a bad value:
            another spelling; for a float, ``nan``, ``inf`` or one too large to be finite
            (``1e999``), refused as not finite.
    """
    # a script's own value: float() took it, and the text rule has no text to read
    value = _read(text, kind) if isinstance(text, str) else _given(text, kind)
    if kind is float and not math.isfinite(value):  # 1e999, or a nan a caller passed
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    return value


def _read(text: str, kind: type) -> int | float:
    """``text`` as ``kind``, spelled as :func:`number` takes it (not yet checked finite)."""
    if kind is float and _NOT_FINITE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
    try:
        if not (INTEGER_TEXT if kind is int else DECIMAL_TEXT).fullmatch(text):
            raise ValueError(text)
        return kind(text)
    except ValueError:  # int() refuses over 4300 digits too
        raise _not_a(kind, text) from None


def _given(value: object, kind: type) -> int | float:
    """``value``, a number a Python caller passed, as ``kind``: a bool is none (``float(True)``
    is 1.0), and a float no int (``count(1)(2.5)`` is refused, not cut to 2)."""
    if isinstance(value, bool) or not isinstance(value, Integral if kind is int else Real):
        raise _not_a(kind, value)
    try:
        return kind(value)
    except OverflowError:  # float(10**400), which "1e400" is refused for; no repr: 4300 digits
        raise argparse.ArgumentTypeError(
            "must be finite, got a number too large for a float"
        ) from None


def _not_a(kind: type, given: object) -> argparse.ArgumentTypeError:
    name = "an integer" if kind is int else "a number"
    return argparse.ArgumentTypeError(f"must be {name}, got {given!r}")


def integer(text: str) -> int:
    """An argparse type: an integer as written (``-3``, ``+3``; not ``1_0``, which int()
    reads as 10, nor other scripts' digits)."""
    return number(text, int)


def decimal(text: str) -> float:
    """An argparse type: a finite number as written (``2``, ``1e-3``, ``.5``, ``5.``, ``+0.1``;
    not ``1_0``, which float() reads as 10.0, nor other scripts' digits, ``nan`` or ``inf``)."""
    return number(text, float)


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``low`` (:func:`integer`'s spellings)."""

    def parse(text: str) -> int:
        value = integer(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse
