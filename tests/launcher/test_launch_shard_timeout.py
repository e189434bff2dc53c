"""``distconv-launch local -- --timeout N``: the shards it starts wait N seconds for a worker,
as the workers do.

The launcher passed ``--timeout`` to the workers only: its shards kept their 60 s, so every
worker of ``-- --timeout 10`` warned at setup that it would give up on a healthy shard (at
15 s) long before the shard named a worker that never came, and did so: the missing rank
reached only the shard's log, and the warning's ways out (a longer timeout, shards started
with a shorter one) were the user's intent undone and a flag the launcher does not have.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from launcher.commands import ServerOptions, parse_program, server_command, train_timeout
from tests.launcher.launch_cli import launch
from tests.sync.ps.ps_helpers import assert_missing_rank_named_unwarned


def _timeout_flag(opts: ServerOptions) -> list[str]:
    argv = server_command(0, 7, opts, python="py")
    return argv[argv.index("--timeout") :][:2] if "--timeout" in argv else []


def test_the_shards_are_given_the_workers_timeout_only_where_they_have_one():
    assert _timeout_flag(ServerOptions(1, 2, timeout=10.0)) == ["--timeout", "10"]
    assert _timeout_flag(ServerOptions(1, 2, timeout=2.5)) == ["--timeout", "2.5"]
    # under a shard's least (0.2 s), which it refused at its start: its least
    assert _timeout_flag(ServerOptions(1, 2, timeout=0.05)) == ["--timeout", "0.2"]
    assert _timeout_flag(ServerOptions(1, 2)) == []  # the shards' own default


@pytest.mark.parametrize(
    ("after", "seconds"),
    [
        (["--epochs", "1", "--timeout", "10"], 10.0),
        (["--timeout=2.5", "--epochs", "1"], 2.5),
        (["--epochs", "1"], None),
    ],
)
def test_the_timeout_is_read_from_the_train_arguments(after, seconds):
    assert train_timeout(parse_program(after)) == seconds


def test_a_program_of_ones_own_gives_none(tmp_path: Path):
    script = tmp_path / "mine.py"
    script.write_text("")
    assert train_timeout(parse_program([str(script), "--timeout", "10"])) is None


@pytest.mark.timeout(60)
def test_a_worker_waiting_for_a_missing_rank_is_told_which_and_warned_of_nothing(
    tmp_path: Path, caplog
):
    """A real shard started with the launcher's command for ``-- --timeout 1``: rank 0's setup
    names rank 1, which never came, where it gave up on the shard (waiting 60 s)."""
    opts = ServerOptions(1, 2, timeout=1.0, extra=("--insecure",))
    argv = server_command(0, 0, opts, python=sys.executable)
    assert_missing_rank_named_unwarned(tmp_path, argv, caplog, timeout=1.0)


@pytest.mark.timeout(120)
def test_a_launch_with_a_timeout_after_its_dashes_warns_no_worker(tmp_path: Path):
    """``distconv-launch local`` itself hands the workers' ``--timeout`` to its shards: no
    worker warns that its shards outwait it (each did, naming 60 s, before)."""
    done = launch(
        "local", "--workers", "2", "--servers", "1", "--insecure", "--run-dir",
        str(tmp_path / "run"), "--", "--data", "synthetic", "--epochs", "1", "--batch-size",
        "64", "--no-progress", "--timeout", "10", cwd=tmp_path,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "for a shard's reply" not in said, said[-3000:]
