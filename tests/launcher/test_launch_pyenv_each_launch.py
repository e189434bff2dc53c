"""A library caller's launches, one after another in one process, each ask pyenv which file
its ``distconv`` shim runs: only the command line's ``main`` forgot the answers of the launch
before, so a caller of the launch's handler (``launcher.k8s.run_k8s``, ``launcher.cli.run_local``)
kept the first for the process's life, after the user switched pyenv versions."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from launcher.cli import build_parser, run_local, run_mpi
from launcher.commands import LaunchError
from launcher.k8s import run_k8s
from launcher.options import parse_own
from launcher.pyenv_shim import one_launch
from tests.launcher.pyenv_fake import SCRIPT, TRAIN, fake_pyenv, needs_script


def _k8s_refusal(tmp_path: Path, after: list[str]) -> str | None:
    """What ``distconv-launch k8s ... --out DIR -- AFTER`` refuses, launched in process by its
    handler as a library caller would; None where it renders."""
    own = ["k8s", "--workers", "2", "--servers", "0", "--image", "d:1"]
    own += ["--out", str(tmp_path / "manifests")]
    try:
        run_k8s(parse_own(build_parser(), own, after), after)
    except LaunchError as exc:
        return str(exc)
    return None


def _switched_versions_seen(tmp_path: Path) -> None:
    """Two launches of ``run_k8s``, the user switching pyenv versions between them: the first
    renders this install's train, the second refuses the shim as another version's."""
    after = [str(fake_pyenv(tmp_path, f"echo {SCRIPT}")), *TRAIN]
    assert _k8s_refusal(tmp_path, after) is None  # this install's train: rendered
    other = tmp_path / "other" / "distconv"  # another version's console script
    other.parent.mkdir()
    shutil.copy2(SCRIPT, other)
    fake_pyenv(tmp_path, f"echo {other}")  # 'pyenv shell 3.11': the shim runs that version's
    assert _k8s_refusal(tmp_path, after) == (
        "k8s renders distconv train jobs; put the program in the image instead"
    )


@needs_script
def test_a_library_callers_next_launch_asks_pyenv_again(tmp_path, monkeypatch):
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    _switched_versions_seen(tmp_path)


@needs_script
def test_a_launch_in_another_thread_keeps_no_answer_for_this_ones(tmp_path, monkeypatch):
    """A launch in a thread (a library caller's local job, running for hours) is not this
    thread's: one count of open launches for the process made this thread's launches part
    of that one, never forgetting an answer while it ran."""
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    opened, done = threading.Event(), threading.Event()

    def long_launch() -> None:
        with one_launch():
            opened.set()
            done.wait(30)

    other = threading.Thread(target=long_launch, daemon=True)
    other.start()
    try:
        assert opened.wait(30)
        _switched_versions_seen(tmp_path)
    finally:
        done.set()
        other.join(30)


def test_each_launch_handler_is_one_launch():
    """A helper written between ``@one_launch()`` and ``run_local`` took the decorator, and a
    library caller's ``run_local`` kept pyenv's answers of the launch before (the tests above
    launch ``run_k8s`` alone): each handler is wrapped itself."""
    for handler in (run_local, run_mpi, run_k8s):
        assert handler.__wrapped__.__name__ == handler.__name__, handler
