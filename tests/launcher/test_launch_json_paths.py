"""Under ``--log-format json`` each run-directory path a launcher message names is a key of
its own, unquoted.

The docs promised that the JSON form carries such a path as a JSON string, unquoted; the JSON
line's ``message`` held only the shell-quoted path (``'D/logs'``, or a ``$'...'`` word where
the path holds a quote), and there was no key for it, so a collector had to undo the shell's
quoting to find the worker's log or ``failure.json``. The message keeps the text form's words.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from launcher.failure import Failure
from launcher.json_lines import PATH_FIELDS, JsonLines
from launcher.messages import Messages
from launcher.restarts import RestartRecord
from launcher.shown import shown
from tests.launcher.launch_cli import launch


def _objects(text: str) -> list[dict]:
    """Each line of ``text`` as the JSON object it must be."""
    return [json.loads(line) for line in text.splitlines()]


def _failed_launch(run: Path, tmp_path: Path):
    """A launch into run directory ``run`` whose one worker fails at start (no MNIST files),
    its lines JSON: its completed process."""
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(run), "--job-id", "j",
        "--", "--epochs", "1", "--data", "mnist", "--data-dir", str(tmp_path / "none"),
        "--log-format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    return done


@pytest.mark.timeout(90)
def test_a_failed_jobs_lines_name_the_logs_the_log_and_the_report_unquoted(tmp_path: Path):
    run = tmp_path / "it's run"  # a quote: its shown form is a $'...' word, not the path
    done = _failed_launch(run, tmp_path)
    err = _objects(done.stderr)  # every line, or json.loads raises
    start = err[0]
    assert start["message"].startswith(
        f"job j: 1 worker(s), 0 server(s); logs in {shown(run / 'logs')};"
    )
    assert start["logs"] == str(run / "logs")
    report = err[-2]  # before the line that says how the run goes on
    assert report["level"] == "error", report
    assert report["log"] == str(run / "logs" / "worker-0.log")
    assert report["report"] == str(run / "failure.json")
    assert Path(report["report"]).is_file() and Path(report["log"]).is_file()
    # the text is the text form's: the paths quoted in it as well
    last = report["message"].splitlines()
    assert f"last lines of {shown(report['log'])}:" in last[0]
    assert last[-1] == f"report: {shown(report['report'])}"
    # the standard keys first, in their order, then the paths
    keys = list(report)
    assert keys[:9] == ["time", "level", "message", "logger", "role", "rank", "world_size",
                        "job_id", "restart"]  # fmt: skip
    assert keys[9:] == ["log", "report"]


@pytest.mark.timeout(90)
def test_a_run_dir_whose_name_is_no_utf8_has_no_path_keys_and_every_line_is_strict_json(
    tmp_path: Path,
):
    """A byte of no UTF-8 in the run directory's name (``\\xff``, which Python holds as the
    lone surrogate ``\\udcff``): as a key the path was written ``"\\udcff"``, which a strict
    parser (Perl's JSON::PP) refuses, the whole line, and jq reads as U+FFFD, another path.
    No JSON string holds that path; the message's ``$'...\\xff...'`` word does, and the line
    stays what it was before the keys: ASCII, no lone surrogate."""
    run = tmp_path / os.fsdecode(b"run\xff")
    done = _failed_launch(run, tmp_path)
    assert "\\udc" not in done.stderr  # no lone surrogate's escape, in any line
    err = _objects(done.stderr)
    start, report = err[0], err[-2]  # the way on after it
    assert f"logs in {shown(run / 'logs')};" in start["message"]
    assert "\\xff" in shown(run) and "logs" not in start
    assert report["level"] == "error" and "log" not in report and "report" not in report
    assert f"report: {shown(run / 'failure.json')}" in report["message"]


def test_the_text_form_has_no_keys_and_the_same_words(tmp_path: Path):
    err = io.BytesIO()
    Messages(err, None).say("logs in 'x'", paths={"logs": tmp_path})
    assert err.getvalue() == b"distconv-launch: logs in 'x'\n"


def test_a_path_does_not_replace_a_standard_key(tmp_path: Path):
    err = io.BytesIO()
    Messages(err, JsonLines("j")).say("m", paths={"message": "x", "logs": tmp_path})
    (line,) = _objects(err.getvalue().decode())
    assert line["message"] == "m" and line["logs"] == str(tmp_path)


def test_the_restarts_line_names_restarts_jsonl(tmp_path: Path):
    err = io.BytesIO()
    messages = Messages(err, JsonLines("j"))
    record = RestartRecord(tmp_path, messages.say)
    log = str(tmp_path / "worker-0.log")
    failure = Failure("worker", 0, exit_code=1, signal=None, log=log, tail=[], restart=0)
    record.add(failure, 1, "restarting the job (1 of 1)")
    record.finish("j")
    (line,) = _objects(err.getvalue().decode())
    assert line["restarts"] == str(tmp_path / "restarts.jsonl")
    assert line["message"].endswith(shown(tmp_path / "restarts.jsonl"))


def test_each_key_a_message_may_carry_is_documented():
    ops = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    start = ops.index("carry each such path")
    said = " ".join(ops[start : ops.index("so a collector", start)].split())
    for key in PATH_FIELDS:
        assert f"`{key}` (" in said, key


@pytest.mark.timeout(60)
def test_a_refusal_naming_the_run_directory_has_its_paths_in_its_message_only(tmp_path: Path):
    """The docs said every launcher line naming a run directory's path carries it as a key,
    but for the notes on a child's output; a refusal before the job runs (keys that cannot be
    reused, here) names the keys folder and the run directory in its message alone, as the
    docs now say."""
    run = tmp_path / "run"
    (run / "keys").mkdir(parents=True)
    (run / "keys" / "server.key").write_text("x\n")  # no key set for 1 worker
    done = launch(
        "local", "--workers", "1", "--servers", "1", "--run-dir", str(run), "--",
        "--epochs", "1", "--log-format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    (line,) = _objects(done.stderr)
    assert f"{shown(run / 'keys')} holds a damaged key set" in line["message"], line
    assert not set(line) & set(PATH_FIELDS), line
    ops = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    start = ops.index("carry each such path")
    said = " ".join(ops[start : ops.index("`mpi --dry-run`", start)].split())
    assert "keys that cannot be reused, name their paths in their `message` only" in said
