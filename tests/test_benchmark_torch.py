"""Whether the benchmarks' torch workers can import torch is asked of a child that imports it
(``harness.torch_unimportable``): its answer decides whether a script prints PyTorch's rows or
a line saying why not. The child must see torch as the workers do, and its answer must come."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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
