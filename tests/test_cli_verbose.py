"""``-v``/``--verbose``: distconv's own debug lines (a shard's drop of each stale push after the
first, each prune of its checkpoint parts), which no flag could turn on though the protocol's
docs pointed at them; before or after the command, as ``-q``, and never with it."""

from __future__ import annotations

import logging

import pytest

from distconv.cli import build_parser
from distconv.verbosity import debug_own_lines, log_level
from tests.test_cli import SMALL, distconv
from tests.test_cli_quiet_after_command import COMMANDS


@pytest.mark.parametrize("command", ["train", "pserver", "keys"])  # check-manifests: no logs
@pytest.mark.parametrize("before, after", [(["-v"], []), ([], ["-v"]), ([], ["--verbose"])])
def test_verbose_is_taken_before_or_after_every_command(command, before, after):
    args = build_parser().parse_args([*before, command, *after, *COMMANDS[command]])
    assert args.verbose is True and args.quiet is False


@pytest.mark.parametrize(
    "flags", [["-q", "train", "-v"], ["-v", "train", "-q"], ["train", "-q", "-v"]]
)
def test_quiet_and_verbose_together_are_a_usage_error(flags):
    proc = distconv(*flags, *SMALL)
    assert proc.returncode == 2, proc.stderr
    assert "-v/--verbose: not allowed with argument -q/--quiet" in proc.stderr


@pytest.fixture
def distconv_logger():
    logger = logging.getLogger("distconv")
    level = logger.level
    yield logger
    logger.setLevel(level)


def test_verbose_lets_distconvs_own_loggers_debug_and_no_one_elses(distconv_logger):
    args = build_parser().parse_args(["-v", "pserver", *COMMANDS["pserver"]])
    debug_own_lines(args)
    assert log_level(args) == logging.INFO  # the root's: other libraries' debug stays off
    assert logging.getLogger("distconv.sync.ps.state").isEnabledFor(logging.DEBUG)


def test_train_v_trains_without_other_libraries_debug_lines(tmp_path):
    """matplotlib alone logged some 150 lines of its font search at the root's DEBUG."""
    proc = distconv("train", "-v", *SMALL, "--epochs", "1", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert "epoch 1/1" in proc.stderr and "findfont" not in proc.stderr
    assert proc.stdout.startswith("test accuracy"), proc.stdout
