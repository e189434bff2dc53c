"""Each ``distconv`` command imports only what it uses: every start of every command (the
test suite starts about 2000) paid for the trainer, the transports and the probes' server
while only ``train`` uses them, and ``check-manifests`` none of them."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)

#: what ``distconv train`` alone needs: numpy (half of a start: the names its flags offer are
#: in distconv.names), the probes' server (prometheus_client, http.server), the checkpoints, the
#: trainer and its layers, the transports
TRAIN_ONLY = (
    "numpy",
    "prometheus_client",
    "http.server",
    "distconv.checkpoint",
    "distconv.service",
    "distconv.trainer",
    "distconv.models",
    "distconv.distributed",
    "distconv.sync.mpi",
    "distconv.sync.local",
)

_PROBE = """
import contextlib, io, sys
from distconv.cli import main
statuses = []
for argv in {commands!r}:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            statuses.append(main(argv))
        except SystemExit as exc:
            statuses.append(exc.code)
print(statuses)
print(sorted(m for m in {heavy!r} if m in sys.modules))
"""


def test_no_command_but_train_imports_the_trainer_nor_the_probes(tmp_path):
    """One interpreter runs them in turn: what any of them imported is still there at the end.
    ``check-manifests`` of a manifest with problems ends with status 1, the failure path that
    asks whether this process is an MPI rank to abort."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    commands = [
        ["check-manifests", str(manifest)],
        ["check-manifests", "-q", str(tmp_path / "none.yaml")],
        ["--help"],
        ["train", "--help"],
        ["pserver", "--help"],
        ["keys", "--help"],
        ["check-manifests", "--help"],
        ["pserver", "--port", "x"],  # refused by the parser: a failure of another command
    ]
    code = _PROBE.format(commands=commands, heavy=TRAIN_ONLY)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=50
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[1, 2, 0, 0, 0, 0, 0, 2]", "[]"], done.stderr


def test_each_user_error_is_named_by_the_module_that_defines_it():
    """The error line is chosen by the classes of the loaded modules: a class named by a module
    that merely re-exports it is missed where the defining module alone was loaded, and its
    error, a user's, would show a traceback."""
    from distconv.stop_request import Preempted
    from distconv.trainer import Preempted as raised_by_the_trainer
    from distconv.user_errors import USER_ERROR_NAMES, user_errors

    named = [(cls.__module__, cls.__name__) for cls in user_errors()]
    assert named == list(USER_ERROR_NAMES)
    assert raised_by_the_trainer is Preempted  # the class _main reads from stop_request


def test_a_user_error_is_one_line_while_another_thread_imports_a_module_of_the_list(
    monkeypatch, capsys
):
    """A module being imported is in ``sys.modules`` before its class is defined: reading the
    class there raised AttributeError in the handler, a traceback in place of the error line."""
    from distconv import cli
    from distconv.data import DataError

    def fails(args):
        raise DataError("no data here")

    monkeypatch.setattr(cli, "run_train", fails)
    half_made = types.ModuleType("distconv.metrics")  # MetricsError not yet defined in it
    monkeypatch.setitem(sys.modules, "distconv.metrics", half_made)
    assert cli.main(["train"]) == 1
    assert capsys.readouterr().err == "distconv train: error: DataError: no data here\n"
