"""Every test that takes the ``cupy`` fixture is marked ``gpu``: a device run (``pytest -m gpu``
on the files ``benchmarks/gpu.py`` finds by that mark) runs only marked tests, and the fixture
skips everywhere else (CI has no device), so an unmarked one never ran anywhere."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_gpu_mark(node: ast.AST) -> bool:
    """Whether ``node`` holds ``pytest.mark.gpu`` (or ``mark.gpu``) anywhere inside."""
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == "gpu"
        and (
            (isinstance(n.value, ast.Attribute) and n.value.attr == "mark")
            or (isinstance(n.value, ast.Name) and n.value.id == "mark")
        )
        for n in ast.walk(node)
    )


def _unmarked_device_tests(path: Path) -> list[str]:
    """The names of the tests of ``path`` that take ``cupy`` with no gpu mark on them or on
    their module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module_marked = any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        and _is_gpu_mark(node.value)
        for node in tree.body
    )
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        takes_cupy = any(a.arg == "cupy" for a in node.args.args)
        if node.name.startswith("test") and takes_cupy and not module_marked:
            if not any(_is_gpu_mark(d) for d in node.decorator_list):
                found.append(node.name)
    return found


def test_every_test_taking_the_cupy_fixture_is_marked_gpu():
    unmarked = [
        f"{path.relative_to(TESTS.parent)}::{name}"
        for path in sorted(TESTS.rglob("test_*.py"))
        for name in _unmarked_device_tests(path)
    ]
    assert unmarked == [], "mark them @pytest.mark.gpu, or pytest -m gpu never runs them"


def test_the_check_finds_an_unmarked_one_alone(tmp_path):
    path = tmp_path / "test_fake.py"
    path.write_text(
        "import pytest\n\n"
        "def test_unmarked(cupy):\n    pass\n\n"
        "@pytest.mark.gpu\ndef test_marked(cupy):\n    pass\n\n"
        "def test_host(rng):\n    pass\n"
    )
    assert _unmarked_device_tests(path) == ["test_unmarked"]
    path.write_text(
        "import pytest\n\npytestmark = pytest.mark.gpu\n\ndef test_a(cupy):\n    pass\n"
    )
    assert _unmarked_device_tests(path) == []
