"""A ``#!`` line naming a relative interpreter (``#!venv/bin/python3``, ``#!rel/sh``) is
resolved by the kernel against the starting process's working directory, not the script's.
The launcher judges it against its own (:func:`launcher.startable.start_problem`,
:func:`~launcher.startable.not_started`): that is the child's, as no child is given another
(``Popen`` without ``cwd``, ``mpiexec`` without ``-wdir``), so the judgement and the kernel's
agree both ways (kept so, and pinned here)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from launcher.startable import not_started, start_problem
from tests.launcher.launch_cli import launch


def _script(tmp_path: Path) -> Path:
    """``tmp_path/bin/run``: ``#!rel/sh``, ``rel/sh`` there in ``tmp_path`` only (not beside
    the script, in ``bin``), and a folder ``tmp_path/elsewhere`` without it."""
    (tmp_path / "rel").mkdir()
    (tmp_path / "rel" / "sh").symlink_to(shutil.which("sh"))
    (tmp_path / "bin").mkdir()
    (tmp_path / "elsewhere").mkdir()
    script = tmp_path / "bin" / "run"
    script.write_text("#!rel/sh\necho ran here\n")
    script.chmod(0o755)
    return script


def test_a_relative_interpreter_is_judged_where_the_kernel_looks(tmp_path, monkeypatch):
    script = _script(tmp_path)
    monkeypatch.chdir(tmp_path / "elsewhere")  # no rel/sh here: the kernel finds none
    why = start_problem(str(script))
    assert why is not None and why.endswith("'rel/sh', does not exist"), why
    with pytest.raises(FileNotFoundError) as kernel:
        subprocess.run([script], check=False)
    assert not_started(str(script), kernel.value) == why
    monkeypatch.chdir(tmp_path)  # rel/sh here: it runs, and nothing is said
    assert start_problem(str(script)) is None
    assert subprocess.run([script], capture_output=True, text=True).stdout == "ran here\n"


@pytest.mark.timeout(60)
def test_a_local_worker_runs_a_relative_interpreter_of_the_launchers_directory(tmp_path):
    script = _script(tmp_path)
    done = launch("local", "--workers", "1", "--servers", "0", "--", str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ran here" in done.stdout, done.stdout[-3000:]
