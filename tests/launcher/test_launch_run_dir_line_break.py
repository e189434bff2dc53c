"""The launcher's messages that name a run directory's files (its logs, the failure report, the
counts of lines or messages not shown) quote each path as its other lines quote a value
(:func:`launcher.shown.shown`): a ``--run-dir`` with a line break in its name split such a
message in two, the second line without its ``distconv-launch:`` and read as another path."""

from __future__ import annotations

from pathlib import Path

import pytest

import distconv
from launcher.commands import LaunchError
from launcher.output_waits import held_output
from launcher.run_dir import clear_run_dir, make_run_dir
from launcher.shown import shown
from launcher.terminal import Terminal
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import RecordingOutput

#: a failed launch's last line, its way on, for a program of the user's that kept nothing
GO_ON_AFRESH = (
    "once the cause is fixed, to go on with this run, give the same command (and --resume auto "
    "after --, where the program takes it)"
)


@pytest.mark.timeout(60)
def test_a_run_dir_with_a_line_break_leaves_each_message_on_its_lines(tmp_path: Path):
    run_dir = tmp_path / "my run\nx"
    argv = ["local", "--workers", "1", "--servers", "0", "--job-id", "j", "--run-dir"]
    done = launch(*argv, str(run_dir), "--", "sh", "-c", "echo boom >&2; exit 3", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    log = run_dir / "logs" / "worker-0.log"
    assert done.stderr.splitlines() == [
        f"distconv-launch: job j: 1 worker(s), 0 server(s); logs in $'{tmp_path}/my run\\nx/logs'; "
        f"distconv {distconv.build_id()}",
        "distconv-launch: worker 0 failed with exit code 3 (after 0 restart(s)); last lines of "
        f"{shown(log)}:",
        "    boom",  # the report's own lines: the child's last ones, then where it is
        f"report: $'{tmp_path}/my run\\nx/failure.json'",
        f"distconv-launch: {GO_ON_AFRESH}",  # a failure's way on, on a line of its own
    ]


def test_a_refused_run_dir_is_named_quoted(tmp_path: Path):
    """A run directory that cannot be made or used was named unquoted in the refusal: the
    launcher's last line (cli's one line) turned its line break into a space, so it named
    another path, one that a shell pastes back as two words."""
    (tmp_path / "file").write_text("")
    unmakeable = tmp_path / "file" / "my run\nx"
    with pytest.raises(LaunchError) as made:
        make_run_dir(unmakeable)
    assert str(made.value).startswith(f"the run directory {shown(unmakeable)} cannot be made: ")
    run_dir = tmp_path / "my run\nx"
    (run_dir / "failure.json").mkdir(parents=True)  # in the way: a folder, not the report
    with pytest.raises(LaunchError) as used:
        clear_run_dir(run_dir)
    assert str(used.value) == (
        f"the run directory {shown(run_dir)} cannot be used: {shown(run_dir / 'failure.json')}: "
        "is a directory (move it away, or choose another --run-dir or --job-id)"
    )


def test_the_notices_of_lines_not_shown_quote_the_logs(tmp_path: Path):
    """What the output lacks at the end (:meth:`Terminal.late`) and a pipe the launcher
    stopped waiting for (:func:`held_output`) name a child's log, on one line each."""
    log = tmp_path / "run\nx" / "logs" / "worker-0.log"
    view = Terminal(RecordingOutput(), lambda said: f"{said}\n".encode())
    view.shut()
    assert view.put("worker-0", log, b"late\n")
    said = [view.late(), held_output("worker-0", log, stalled=True)]
    view.close(1.0)
    for line in said:
        assert line is not None and "\n" not in line and shown(log) in line, line


#: a program that removes itself and fails, its last line holding a carriage return (a
#: progress bar's): its restart cannot start it
GONE_AFTER_ONE_RUN = '#!/bin/sh\nrm -- "$0"\nprintf "gone\\rback\\n"\nexit 1\n'


@pytest.mark.timeout(60)
def test_each_message_is_one_line_though_a_value_in_it_is_not_quoted(tmp_path: Path):
    """A value put unquoted in a message split the failure report at its line break, the rest
    read as a line of its own: :meth:`launcher.messages.Messages.line` keeps each on one line.
    The restart's 'cannot start' error quotes the program; the report's tail,
    the child's last line, holds a carriage return, which a reader splits lines at too: the
    report's own line escapes it (the program's path, quoted since, no longer tried it)."""
    program = tmp_path / "my\nprog"
    program.write_text(GONE_AFTER_ONE_RUN)
    program.chmod(0o755)
    argv = ["local", "--workers", "1", "--servers", "0", "--max-restarts", "1", "--run-dir"]
    done = launch(*argv, str(tmp_path / "run"), "--", f"./{program.name}", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert all(line.startswith(("distconv-launch: ", "    ", "report: ")) for line in lines), lines
    assert lines[-4].endswith(
        "then restart 1 of 1 could not start: cannot start worker-0 ($'./my\\nprog'): no such "
        f"file or directory; last lines of {shown(tmp_path / 'run' / 'logs' / 'worker-0.log')}:"
    ), lines
    report = f"report: {shown(tmp_path / 'run' / 'failure.json')}"
    assert lines[-3:] == ["    gone\\rback", report, f"distconv-launch: {GO_ON_AFRESH}"]
