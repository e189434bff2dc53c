"""Whether the benchmarks' torch workers can import torch is asked of a child that imports it
(``harness.torch_unimportable``): its answer decides whether a script prints PyTorch's rows or
a line saying why not. The child must see torch as the workers do, and its answer must come."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.child_env import child_path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def fake_torch(folder: Path, body: str) -> Path:
    """``folder`` with a ``torch`` package whose ``__init__`` is ``body``."""
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text(body)
    return folder


@pytest.fixture
def torch_unimportable(monkeypatch, tmp_path) -> Callable[[str], str | None]:
    """``harness.torch_unimportable`` asked afresh (its answer is cached), with a ``torch``
    of the given ``__init__`` first on both this process's path and the child's."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import harness

    def ask(body: str) -> str | None:
        installed = fake_torch(tmp_path / "installed", body)
        monkeypatch.syspath_prepend(str(installed))
        monkeypatch.setenv("PYTHONPATH", str(installed))
        harness.torch_unimportable.cache_clear()
        try:
            return harness.torch_unimportable()
        finally:
            harness.torch_unimportable.cache_clear()

    return ask


@pytest.mark.timeout(60)
def test_a_torch_in_the_working_directory_is_not_the_workers(
    torch_unimportable, tmp_path, monkeypatch
):
    """``python -c`` puts the working directory first on its path; the workers, scripts, put
    their own folder there. Run from a PyTorch source tree, its unbuilt ``torch/`` failed in
    the child and every torch row was dropped, though the workers import the installed one."""
    monkeypatch.chdir(fake_torch(tmp_path / "source-tree", 'raise ImportError("unbuilt")\n'))
    assert torch_unimportable("") is None


@pytest.mark.timeout(60)
def test_a_torch_that_fails_to_import_is_said_with_its_error(torch_unimportable):
    said = torch_unimportable('raise ImportError("libcudnn.so.9: cannot open")\n')
    assert said == "ImportError: libcudnn.so.9: cannot open"


@pytest.mark.timeout(60)
def test_a_hung_import_is_said_not_a_traceback(torch_unimportable, monkeypatch):
    """The child's timeout raised TimeoutExpired through the driver: a traceback, after the
    wait, in place of the line saying there are no PyTorch rows."""
    import harness

    monkeypatch.setattr(harness, "TORCH_IMPORT_S", 1)
    said = torch_unimportable("import time\ntime.sleep(30)\n")
    assert said == "import torch took more than 1 s"


#: each script that has torch rows (allreduce.py's gloo rows are its tests'), its quickest run,
#: and what its line says it goes on without
SCRIPTS = {
    "train_step.py": (
        ["--threads", "1", "--repeat", "1", "--rounds", "1", "--cases", "digits 8x8 b16"],
        "printing distconv times only",
    ),
    "conv.py": (
        ["--threads", "1", "--cases", "lenet3 conv2 N64 C32 4^2 K64 3x3 p1"],
        "printing distconv times only",
    ),
    "conv_operator.py": (["--threads", "1", "--repeat", "1"], "no torch columns"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_each_script_without_pytorch_says_why(script, tmp_path):
    """train_step.py and conv.py said "PyTorch is not importable" whatever the import's error,
    so a broken install read as a missing one; conv_operator.py said nothing, its torch
    columns a bare "-". Each says what it goes on without, and the import's error."""
    flags, without = SCRIPTS[script]
    shadow = fake_torch(tmp_path, 'raise ModuleNotFoundError("torch (shadowed)", name="torch")\n')
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *flags],
        env={**os.environ, "PYTHONPATH": child_path(shadow)},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = f"PyTorch is not importable: {without} (ModuleNotFoundError: torch (shadowed))\n"
    assert said in done.stdout
