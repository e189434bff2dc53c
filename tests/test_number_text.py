"""Every command line reads a decimal flag as it reads an integer one: as written, in ASCII
digits. ``float()`` took ``1_0`` as 10.0, the Arabic-Indic three as 3.0, and
``nan``, ``inf`` or ``1e999`` (an inf) got past some flags to fail later or never."""

from __future__ import annotations

import argparse
from fractions import Fraction

import pytest

from distconv.cli import build_parser as distconv_parser
from launcher.cli import build_parser as launcher_parser

SHARD = ["pserver", "--bind", "h:1", "--shard", "0", "--num-shards", "1", "--workers", "1"]

#: what each command line's decimal flags are parsed after, with the flag and its value last
COMMANDS = {
    "train --lr": ["train"],
    "train --lr-decay": ["train"],
    "train --timeout": ["train"],
    "train --stall-seconds": ["train"],
    "train --bucket-mb": ["train"],
    "pserver --timeout": SHARD,
    "pserver --drain-seconds": SHARD,
    "pserver --stall-seconds": SHARD,
    "launch --grace": ["local", "--workers", "1"],
    "launch --settle": ["local", "--workers", "1"],
}


def _parse(command: str, value: str):
    program, flag = command.split()
    parser = launcher_parser() if program == "launch" else distconv_parser()
    return parser.parse_args([*COMMANDS[command], flag, value]), flag


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    "text, words",
    [
        ("1_0", "must be a number, got '1_0'"),  # float() reads it as 10.0
        ("\u0663", "must be a number, got '\u0663'"),  # an Arabic-Indic 3
        ("\uff11", "must be a number, got '\uff11'"),  # a full-width 1
        ("nan", "must be finite, got 'nan'"),
        ("Infinity", "must be finite, got 'Infinity'"),
        ("1e999", "must be finite, got '1e999'"),  # float() makes it inf
    ],
)
def test_a_decimal_flag_written_otherwise_is_refused_on_every_command_line(
    command, text, words, capsys
):
    with pytest.raises(SystemExit) as stopped:
        _parse(command, text)
    assert stopped.value.code == 2
    flag = command.split()[1]
    assert f"argument {flag}: {words}" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    "text, value",
    [("1e-3", 1e-3), ("2E-1", 0.2), (".5", 0.5), ("1.", 1.0), ("+0.1", 0.1), (" 1 ", 1.0)],
)
def test_a_decimal_flag_takes_every_plain_spelling(command, text, value):
    args, flag = _parse(command, text)
    assert getattr(args, flag.lstrip("-").replace("-", "_")) == value


@pytest.mark.parametrize("size", ["1e303", "1.7e308"])
def test_a_bucket_too_large_to_count_in_bytes_is_a_usage_error(size, capsys):
    """``--bucket-mb 1e303`` is a finite number of MiB, but times 2**20 an inf number of bytes:
    ``int()`` of it was an OverflowError traceback, where 1e999 is one usage line."""
    with pytest.raises(SystemExit) as stopped:
        _parse("train --bucket-mb", size)
    assert stopped.value.code == 2
    assert f"argument --bucket-mb: must be finite in bytes, got {size} MiB" in (
        capsys.readouterr().err
    )
    assert _parse("train --bucket-mb", "1e300")[0].bucket_mb == 1e300  # 1e300 * 2**20 is finite


def test_a_number_a_script_passes_itself_is_read_as_it_is():
    """The types are public (``distconv.script_flags``): a script that reads its own default
    through one (``positive_float(os.environ.get("LR", 0.01))``) got 0.01 from float(); the
    text rule made it a TypeError, 'expected string or bytes-like object'."""
    from distconv.script_flags import count, positive_float
    from launcher.options import seconds

    assert positive_float(0.01) == 0.01 and positive_float(2) == 2.0
    assert type(positive_float(2)) is float and seconds(5) == 5.0
    assert count(1)(3) == 3


@pytest.mark.parametrize(
    "value, words",
    [
        (float("nan"), "must be finite, got nan"),
        (float("inf"), "must be finite, got inf"),
        (True, "must be a number, got True"),  # float(True) is 1.0: a flag mixed up, not a number
        (None, "must be a number, got None"),
    ],
)
def test_a_value_a_script_passes_that_is_no_finite_number_is_refused_in_words(value, words):
    from distconv.script_flags import positive_float

    with pytest.raises(argparse.ArgumentTypeError, match=f"^{words}$"):
        positive_float(value)


@pytest.mark.parametrize("value", [2.5, 3.0, True])
def test_a_count_a_script_passes_that_is_no_integer_is_refused_in_words(value):
    from distconv.script_flags import count

    with pytest.raises(argparse.ArgumentTypeError, match=f"^must be an integer, got {value}$"):
        count(1)(value)


@pytest.mark.parametrize(
    "value", [10**400, -(10**5000), Fraction(10**400, 3)], ids=["1e400", "-1e5000", "fraction"]
)
def test_a_number_a_script_passes_too_large_for_a_float_is_refused_in_words(value):
    """``positive_float(10**400)`` is a real number float() cannot hold: it was an
    OverflowError traceback, where the text ``1e400`` is refused as not finite. Its repr may
    be one Python will not write (over 4300 digits), so the words do not quote it."""
    from distconv.script_flags import positive_float

    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be finite, got a number too "):
        positive_float(value)
