"""``distconv-launch local -- --timeout 0.1``: refused before anything starts, naming the
shards' least ``--timeout`` (0.2 s).

The launch gives its shards the workers' ``--timeout``, floored at a shard's least. Below it,
the launch started all the same: the shards waited 0.2 s, and every worker warned at setup that
it waits 0.15 s for a shard's reply, no longer than its shards wait for every worker. The launch
now says so once, up front.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.commands import UsageError, parse_program, train_timeout
from tests.launcher.launch_cli import launch


def test_a_timeout_below_the_shards_least_is_refused_naming_it():
    with pytest.raises(UsageError, match=r"--timeout 0\.1 is below 0\.2 s, the least"):
        train_timeout(parse_program(["--epochs", "1", "--timeout", "0.1"]))
    assert train_timeout(parse_program(["--timeout=0.2"])) == 0.2  # the least itself


def test_a_timeout_just_below_the_least_is_said_as_given():
    """Six significant digits said ``--timeout 0.2 is below 0.2 s``: the refusal of a value
    it then named as the least itself."""
    with pytest.raises(UsageError, match=r"--timeout 0\.1999999 is below 0\.2 s, the least"):
        train_timeout(parse_program(["--epochs", "1", "--timeout", "0.1999999"]))


@pytest.mark.timeout(60)
def test_the_launch_is_refused_before_it_starts_anything(tmp_path: Path):
    run_dir = tmp_path / "run"
    done = launch(
        "local", "--workers", "2", "--servers", "1", "--insecure", "--run-dir", str(run_dir),
        "--", "--data", "synthetic", "--epochs", "1", "--no-progress", "--timeout", "0.1",
        cwd=tmp_path,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    assert "--timeout 0.1 is below 0.2 s" in said, said[-3000:]
    assert "give --timeout 0.2 or more" in said, said[-3000:]
    assert not run_dir.exists(), sorted(run_dir.rglob("*"))  # no run, no child started
    assert "for a shard's reply" not in said  # no worker ran to warn that it waits less
