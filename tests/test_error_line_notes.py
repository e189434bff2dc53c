"""The notes an error carries (PEP 678: ``add_note``), often the way out, reach the user where
a process ends on that error in one line: ``run_main``'s and ``distconv train``'s
``PROG: error: ...`` (:func:`distconv.logs.error_line`), a script's refused checkpoint
(:func:`distconv.script_flags.refusals`) and the launcher's refusals. Each line of a note goes
on a line of its own, ``PROG: note: ...``, before the error's line, which stays the last: the
launcher reads it. Under a JSON log every line is one JSON object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.messages import note_lines, quote_in_errors
from distconv.notes import add_note
from tests.child_env import child_env
from tests.launcher.launch_cli import ENV

#: the note every script below puts on its error: two lines, a blank one between them
NOTE = "the shard is only slow?\n\n  raise --timeout (now 10 s)"
#: what each line of it is said as, behind ``PROG: note: ``
NOTE_SAID = ["the shard is only slow?", "raise --timeout (now 10 s)"]


def _run(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess:
    """``script``, written to ``tmp_path/script.py``, run with ``args`` in ``tmp_path``."""
    path = tmp_path / "script.py"
    path.write_text(script)
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, env=child_env(),
        cwd=tmp_path, timeout=60,
    )  # fmt: skip


def _said(done: subprocess.CompletedProcess, log_format: str) -> list[str]:
    """The lines ``done`` ended its stderr with, each a JSON object's message under JSON (which
    every line must be)."""
    lines = done.stderr.splitlines()
    if log_format == "json":
        return [json.loads(line)["message"] for line in lines]
    return lines


def _ends_noted(said: list[str], who: str, error: str) -> None:
    """``said`` ends with the note's lines, each ``WHO: note: ...``, then ``error``, last."""
    assert said[-3:] == [*(f"{who}: note: {line}" for line in NOTE_SAID), error], said


#: a script run through run_main that ends on a refused checkpoint, the note on it
RUN_MAIN = f"""\
import sys
import distconv.distributed as dist
from distconv.checkpoint import CheckpointError
from distconv.notes import add_note


def main():
    dist.init("sgd", lr=0.01, log_format=sys.argv[1])
    error = CheckpointError("no checkpoint in runs/x")
    add_note(error, {NOTE!r})
    raise error


sys.exit(dist.run_main(main))
"""


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_run_mains_one_line_error_is_led_by_its_notes(tmp_path, log_format):
    """``run_main`` ends on a user's error in one line (``error_line``, as ``distconv train``
    does): the note, dropped before, now comes before it, the error's line still last."""
    done = _run(tmp_path, RUN_MAIN, log_format)
    assert done.returncode == 1, done.stderr
    said = _said(done, log_format)
    _ends_noted(said, "script.py", "script.py: error: no checkpoint in runs/x")


#: a script whose ``refusals`` turn a refused checkpoint, the note on it, into one line
REFUSALS = f"""\
import argparse
from distconv.checkpoint import CheckpointError
from distconv.notes import add_note
from distconv.script_flags import refusals

parser = argparse.ArgumentParser(prog="train.py")
with refusals(parser):
    error = CheckpointError("runs/x holds a run; --resume goes on from it")
    add_note(error, {NOTE!r})
    raise error
"""


def test_a_scripts_refusal_is_led_by_its_notes(tmp_path):
    done = _run(tmp_path, REFUSALS)
    assert done.returncode == 1, done.stderr
    error = "train.py: error: runs/x holds a run; --resume goes on from it"
    assert done.stderr.splitlines() == [*(f"train.py: note: {n}" for n in NOTE_SAID), error]


#: the real launcher, its parsing of the program after ``--`` made to note the refusal it
#: raises (no refusal of the launcher carries a note yet; one that does must not lose it)
LAUNCHER = f"""\
import sys

import launcher.cli as cli
from distconv.notes import add_note

parse = cli.parse_program


def noted_parse(rest):
    try:
        return parse(rest)
    except cli.LaunchError as error:
        add_note(error, {NOTE!r})
        raise


cli.parse_program = noted_parse
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_launchers_refusal_is_led_by_its_notes(tmp_path, log_format):
    """``distconv-launch local: error: ...`` with the note before it, the launcher's JSON line
    for each under ``-- train --log-format json``."""
    path = tmp_path / "launch.py"
    path.write_text(LAUNCHER)
    argv = ["local", "--workers", "1", "--", "train", "--epochs", "0", "--log-format", log_format]
    done = subprocess.run(
        [sys.executable, str(path), *argv], capture_output=True, text=True, env=ENV,
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    said = _said(done, log_format)
    error = (
        "distconv-launch local: error: argument --epochs: must be >= 1, got 0 "
        "(in the distconv train arguments after --)"
    )
    _ends_noted(said, "distconv-launch local", error)


def test_an_error_without_notes_keeps_its_one_line(tmp_path):
    """No note, no line more: the launcher's refusal is its one line, as before."""
    path = tmp_path / "launch.py"
    path.write_text("import sys, launcher.cli as cli\nsys.exit(cli.main(sys.argv[1:]))\n")
    argv = ["local", "--workers", "1", "--", "train", "--epochs", "0"]
    done = subprocess.run(
        [sys.executable, str(path), *argv], capture_output=True, text=True, env=ENV,
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_a_notes_value_with_a_line_break_is_quoted_not_split():
    """A value of the command line with a line break in a note (``--out $'a\\nb'``) reads as
    the shell word, as in the error's own line, not as two lines of the note."""
    error = ValueError("refused")
    add_note(error, "look in runs/a\nb for the run")
    quote_in_errors(["runs/a\nb"])
    try:
        assert note_lines("prog", error) == ["prog: note: look in $'runs/a\\nb' for the run"]
    finally:
        quote_in_errors([])
