"""``-q``/``--quiet`` after the command means what it means before it:
``distconv train -q`` was refused as an unrecognized argument."""

from __future__ import annotations

import pytest

from distconv.cli import build_parser
from tests.test_cli import SMALL, distconv

#: each command with -q, and the arguments it needs to parse
COMMANDS = {
    "train": [],
    "pserver": ["--bind", "127.0.0.1:0", "--shard", "0", "--num-shards", "1", "--workers", "1"],
    "keys": ["keys-dir", "--workers", "1"],
    "check-manifests": ["job.yaml"],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "before, after, quiet",
    [([], [], False), (["-q"], [], True), ([], ["-q"], True), ([], ["--quiet"], True)],
)
def test_quiet_is_taken_before_or_after_every_command(command, before, after, quiet):
    args = build_parser().parse_args([*before, command, *after, *COMMANDS[command]])
    assert args.quiet is quiet


@pytest.mark.parametrize("command", COMMANDS)
def test_each_commands_help_lists_quiet(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = capsys.readouterr().out
    assert "-q, --quiet" in text and ("[-q]" in text or "[-q | -v]" in text)


def test_train_q_logs_warnings_only_and_trains(tmp_path):
    proc = distconv("train", "-q", *SMALL, "--epochs", "1", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert "training on synthetic" not in proc.stderr and "epoch 1/1" not in proc.stderr
    assert proc.stdout.startswith("test accuracy"), proc.stdout
