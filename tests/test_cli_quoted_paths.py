"""A path given with a line break is shown quoted in the one error line, not squeezed into
another path: ``--out $'x\\ny'`` read as ``x y``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from distconv import messages
from distconv.messages import one_line, quote_in_errors, shell_quoted
from tests.child_env import child_env
from tests.test_cli import SMALL, _assert_one_line_error, distconv


@pytest.fixture(autouse=True)
def _no_quoted_values():
    """The values to quote are the process's: none before nor after each test."""
    quote_in_errors(())
    yield
    quote_in_errors(())


@pytest.mark.parametrize(
    "text, word",
    [
        ("a\nb", r"$'a\nb'"),
        ("it's\\here", r"$'it\'s\\here'"),
        ("t\tr\rv\vf\f", r"$'t\tr\rv\vf\f'"),
        # as the bytes that name it, two digits each: A and B stay apart
        ("\x1cA\u2028B\x85", r"$'\x1cA\xe2\x80\xa8B\xc2\x85'"),
        ("\U0001f600ok", "$'\U0001f600ok'"),  # printable: as it is
    ],
)
def test_shell_quoted_escapes_what_breaks_or_does_not_print(text, word):
    assert shell_quoted(text) == word
    assert len(word.splitlines()) == 1


def test_a_quoted_word_pastes_back_into_bash_as_the_same_bytes():
    """``\\x85`` made the byte 0x85, not U+0085's two, and the surrogate a byte that is no
    UTF-8 is held as (``\\udcff``) came back as three other bytes."""
    value = "x\n" + os.fsdecode(b"\xff\xc2\x85\x1b\xe2\x80\xa8") + "'\\\"$y"
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    script = f"printf %s {shell_quoted(value)}"
    pasted = subprocess.run(["bash", "-c", script], capture_output=True, env=env, check=True)
    assert pasted.stdout == os.fsencode(value)


def test_a_quoted_path_and_the_folders_above_it_are_quoted_where_an_error_names_them(tmp_path):
    out = tmp_path / "x\ny" / "run"
    quote_in_errors([str(out), "plain"])
    said = one_line(f"{out / 'checkpoints'} missing: {out.parent} is a file\nnext plain line")
    above = shell_quoted(str(out.parent))
    assert (
        said == f"{shell_quoted(str(out))}/checkpoints missing: {above} is a file next plain line"
    )


def test_ordinary_values_and_a_bare_break_leave_the_message_as_it_was(tmp_path):
    quote_in_errors([str(tmp_path / "plain"), "\n", "relative"])
    assert not messages._QUOTED
    assert one_line(f"{tmp_path / 'plain'} is\nmissing") == f"{tmp_path / 'plain'} is missing"


@pytest.mark.parametrize(
    "value, message, said",
    [
        (
            "run\n",
            "cannot resume the run\nfrom step 5: run\n/x",
            r"the run from step 5: $'run\n'/x",
        ),
        ("\nb", "a\nb c; \nb is a file", r"a b c; $'\nb' is a file"),
    ],
)
def test_a_value_with_a_break_at_its_end_leaves_the_message_own_breaks(value, message, said):
    """A value that begins or ends with its break matched the message's own break between two
    words, which was shown ``the $'run\\n'from``."""
    quote_in_errors([value])
    assert one_line(message).endswith(said), one_line(message)


@pytest.mark.parametrize("relative", [False, True])
def test_the_error_line_quotes_an_out_with_a_line_break(tmp_path, relative):
    out = "x\ny" if relative else str(tmp_path / "x\ny")
    proc = distconv("train", *SMALL, "--out", out, "--resume", cwd=tmp_path)
    shown = shell_quoted(out)
    _assert_one_line_error(proc, f"in {shown}/checkpoints: {shown} does not exist")


@pytest.mark.parametrize("out", ["./x\ny", "x\ny/", "x\ny//"])
def test_the_error_line_quotes_an_out_written_otherwise_than_it_is_named(tmp_path, out):
    """A message names Path(out), without the './' or the trailing '/' given: that form was
    squeezed to 'x y'."""
    proc = distconv("train", *SMALL, "--out", out, "--resume", cwd=tmp_path)
    _assert_one_line_error(proc, f"{shell_quoted('x' + chr(10) + 'y')} does not exist")
    assert "x y" not in proc.stderr.splitlines()[-1]


def test_a_working_directory_gone_is_an_error_line_not_a_traceback(tmp_path):
    """Each value's absolute form was taken for the quoting whether it breaks a line or not,
    and abspath raised where the working directory is gone (realpath too, for a link that
    refuses readlink: ``--out /proc/1/cwd/run``): a traceback."""
    gone = tmp_path / "gone"
    gone.mkdir()
    argv = [sys.executable, "-m", "distconv", "train", *SMALL, "--epochs", "1", "--out", "run"]
    proc = subprocess.run(
        argv,
        cwd=gone,
        preexec_fn=gone.rmdir,  # in the child, once in it
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    _assert_one_line_error(proc, "output directory run cannot be made: no such file or directory")


def test_an_argparse_type_quotes_a_path_with_a_line_break(tmp_path):
    """``distconv keys DIR`` checks DIR as argparse reads it, before the command line hands its
    values on: its error was printed as it was, on two lines."""
    (tmp_path / "f\ng").write_text("a file")
    proc = distconv("keys", "f\ng/keys", "--workers", "1", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last == "distconv keys: error: argument dir: $'f\\ng' is a file, not a folder", last


@pytest.mark.parametrize(
    "argv, said",
    [
        (["train", "--lr-decay", "\n2"], "argument --lr-decay: must lie in (0.0, 1.0], got 2"),
        (
            ["train", "--bucket-mb", "1e303\n"],
            "--bucket-mb: must be finite in bytes, got 1e303 MiB",
        ),
        (["train", "--bucket-mb", "\n1e-9"], "must be at least 1 byte (9.53674e-07 MiB), got 1e-9"),
        (["pserver", "--stall-seconds", "-1\n"], "--stall-seconds: must be finite and > 0, got -1"),
    ],
)
def test_a_number_refused_with_a_line_break_around_it_is_one_error_line(argv, said):
    """float() takes a number with white space around it, a line break too, and the error
    named the number as given: 'got ' on one line and '2' on the next."""
    proc = distconv(*argv)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[-1].endswith(said) and "error:" in lines[-1], proc.stderr


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_an_out_with_a_byte_of_no_utf8_is_quoted_as_its_bytes(tmp_path, log_format):
    """A value with no line break was left as it was: a byte of no UTF-8 (held as the surrogate
    \\udcff) was written 'x\\udcffy' by stderr and as a lone surrogate, which strict parsers
    refuse, in JSON: another path either way."""
    out = "x" + os.fsdecode(b"\xff") + "y"
    argv = ("train", *SMALL, "--out", out, "--resume", "--log-format", log_format)
    proc = distconv(*argv, cwd=tmp_path)
    last = proc.stderr.splitlines()[-1]
    said = json.loads(last)["message"] if log_format == "json" else last
    assert r"in $'x\xffy'/checkpoints: $'x\xffy' does not exist" in said, last
    assert "\\ud" not in last.lower(), last


def test_the_closing_lines_of_an_out_with_a_line_break_are_one_line(tmp_path):
    """``distconv train``'s result line and its "nothing left to do" broke in two at a line
    break in ``--out``: a reader of stdout by lines got half a path; the path is
    the shell word its error lines show."""
    out = "a\nb"
    for resume in ((), ("--resume",)):  # the result line, then "nothing left to do"
        proc = distconv("train", *SMALL, "--epochs", "1", "--out", out, *resume, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        (line,) = proc.stdout.splitlines()
        assert line.endswith(("in $'a\\nb'", "in $'a\\nb' has finished epoch 1")), line
