"""What each of ``distconv train``'s flags takes: the argparse types that read a value and
refuse, in one line naming the flag's rule, one the run would fail on later (a port past
65535, a size under a byte, an empty list of servers, a blank path).

:mod:`distconv.train_args` declares the flags with them; a training script's flags
(:mod:`distconv.script_flags`) and ``distconv pserver``'s take some of them too.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from distconv.number_text import decimal, int_at_least, integer

#: an argparse type: an integer of at least 1 (counts: epochs, workers, checkpoints kept)
positive_int = int_at_least(1)


def port(text: str) -> int:
    """A TCP port, 0..65535: past it ``bind`` raised an OverflowError traceback."""
    value = integer(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535, got {value}")
    return value


def float_in(low: float, high: float, *, high_closed: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite float in ``(low, high)`` (or ``(low, high]``)."""

    def parse(text: str) -> float:
        value = decimal(text)
        if not (value > low and (value <= high if high_closed else value < high)):
            closing = "]" if high_closed else ")"
            given = _shown(text)
            raise argparse.ArgumentTypeError(f"must lie in ({low}, {high}{closing}, got {given}")
        return value

    return parse


def _shown(text: str | float) -> str:
    """``text`` as an error shows it: a number may be given with a line break around it
    (``float()`` takes it), which argparse printed as it was: the error on two lines."""
    return str(text).strip()


#: an argparse type: a finite number above 0
positive_float = float_in(0.0, float("inf"))


def mebibytes(text: str) -> float:
    """A positive size in MiB of at least one byte, and a finite count of bytes: less rounds to
    0 bytes, which the sync refused with a traceback; past about 1.7e302 MiB it is inf bytes."""
    value = positive_float(text)
    if not math.isfinite(value * 2**20):  # 1e303: int() of its inf bytes raised a traceback
        raise argparse.ArgumentTypeError(f"must be finite in bytes, got {_shown(text)} MiB")
    if int(value * 2**20) < 1:
        least = f"must be at least 1 byte ({2**-20:g} MiB)"
        raise argparse.ArgumentTypeError(f"{least}, got {_shown(text)}")
    return value


def server_list(text: str) -> str:
    """``--pservers``, naming at least one shard: an empty list (``--pservers "$UNSET"``) read
    as no flag at all, so the worker trained alone, silently, even beside a
    ``DISTCONV_PSERVERS`` that the flag overrides. The addresses are checked with the runtime."""
    if not any(item.strip() for item in text.split(",")):
        raise argparse.ArgumentTypeError(f"must name at least one HOST:PORT, got {text!r}")
    return text


def resume_mode(text: str) -> str:
    """``--resume``'s one value, ``auto`` (the bare flag takes none)."""
    if text != "auto":
        raise argparse.ArgumentTypeError(f"the only value --resume takes is 'auto', got {text!r}")
    return text


def not_blank(text: str) -> str:
    """A path or a host, which a blank value (an unset variable) names none of: ``--health-host
    ""`` bound every interface, where the default is loopback alone."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text
