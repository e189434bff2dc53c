"""Under a JSON log, the lines of an error's notes (PEP 678) were objects of level ``error``
with the error's own keys, before the error's: a collector that alerts on, or takes the cause
from, the first ``"level": "error"`` object of a pod got the note. Each note is now an object
of level ``info`` marked ``"note": true``, and the error's object, the last, is the one of
level ``error``, its keys as they were. Real scripts and the real launcher, in subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from distconv.logs import configure_logging
from distconv.notes import add_note
from distconv.runtime import Runtime
from distconv.sync.mpi.leaving import install_abort_hook
from tests.launcher.launch_cli import ENV
from tests.mpi.common import AbortRecorder
from tests.mpi.test_abort_hook_json_notes import _log_uncaught, as_on_3_10  # noqa: F401
from tests.test_error_line_notes import LAUNCHER, NOTE_SAID, REFUSALS, RUN_MAIN, _run
from tests.test_run_main import NOTES, NOTES_SAID, run_interrupted

#: the keys of every JSON line of the log, the error's own, in their order
KEYS = ["time", "level", "message", "logger", "role", "rank", "world_size", "job_id", "restart"]


def _ends_with_marked_notes(stderr: str, who: str, error: str) -> None:
    """``stderr`` is one JSON object a line, ending with one note object for each line of the
    note (level ``info``, ``"note": true``), then the error's (its message begins with
    ``error``): the one of level ``error``, with no key more than the log's own."""
    objects = [json.loads(line) for line in stderr.splitlines()]
    *notes, last = objects[-len(NOTE_SAID) - 1 :]
    assert [n["message"] for n in notes] == [f"{who}: note: {line}" for line in NOTE_SAID]
    assert all(n["level"] == "info" and n["note"] is True for n in notes), notes
    assert last["message"].startswith(error) and list(last) == KEYS, last
    assert [o for o in objects if o["level"] == "error"] == [last], objects


def test_run_mains_error_under_json_is_its_one_error_object_after_marked_notes(tmp_path):
    done = _run(tmp_path, RUN_MAIN, "json")
    assert done.returncode == 1, done.stderr
    _ends_with_marked_notes(done.stderr, "script.py", "script.py: error: no checkpoint in runs/x")


def test_a_scripts_refusal_under_json_is_its_one_error_object_after_marked_notes(tmp_path):
    """``script_flags.refusals`` in a script whose log is JSON (``init(log_format="json")``)."""
    script = 'import distconv.distributed as dist\ndist.init("sgd", log_format="json")\n'
    done = _run(tmp_path, script + REFUSALS)
    assert done.returncode == 1, done.stderr
    error = "train.py: error: runs/x holds a run; --resume goes on from it"
    _ends_with_marked_notes(done.stderr, "train.py", error)


def test_the_launchers_refusal_under_json_is_its_one_error_object_after_marked_notes(tmp_path):
    path = tmp_path / "launch.py"
    path.write_text(LAUNCHER)
    argv = ["local", "--workers", "1", "--", "train", "--epochs", "0", "--log-format", "json"]
    done = subprocess.run(
        [sys.executable, str(path), *argv], capture_output=True, text=True, env=ENV,
        cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    error = "distconv-launch local: error: argument --epochs: must be >= 1, got 0"
    _ends_with_marked_notes(done.stderr, "distconv-launch local", error)


@pytest.mark.timeout(60)
def test_a_ctrl_cs_notes_under_json_are_marked_as_notes(tmp_path):
    """The notes after ``interrupted`` (``MPISync.fail_setup``'s: the error the Ctrl-C cut
    short, whether the others were told) were warning objects like the interrupt's own, with
    no mark: a collector picking the notes out by ``"note": true`` missed these. Each is
    marked now, the ``interrupted`` line not; all stay at the interrupt's level."""
    done = run_interrupted(tmp_path, *NOTES, LOG_FORMAT="json")
    assert done.returncode == 130, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stderr.splitlines()[-len(NOTES_SAID) :]]
    assert [line["message"] for line in lines] == NOTES_SAID
    assert [line.get("note") for line in lines] == [None] + [True] * (len(NOTES_SAID) - 1)
    assert all(line["level"] == "warning" for line in lines), lines


@pytest.mark.usefixtures("as_on_3_10")  # its fixture, imported above
def test_the_notes_a_scripts_hook_left_out_are_marked_info(capsys, monkeypatch):
    """An MPI rank's abort after a script's own hook logged the error: the notes that hook left
    out are written after its report, each an info object marked ``"note": true``, not a second
    ``error`` object of the rank's failure."""
    configure_logging(Runtime(), fmt="json", environ={})  # on the stderr captured now
    monkeypatch.setattr(sys, "excepthook", _log_uncaught)
    restore = install_abort_hook(AbortRecorder())
    try:
        try:
            error = RuntimeError("rank 1 fails on purpose")
            add_note(error, "the way out")
            raise error
        except RuntimeError:
            sys.excepthook(*sys.exc_info())
    finally:
        restore()
    said = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(s["level"], s["message"], s.get("note")) for s in said] == [
        ("error", "uncaught", None),
        ("info", "the way out", True),
    ], said
