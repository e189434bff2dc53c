"""distconv's hints reach a typed user's checker: ``mypy --strict`` passes the examples and a
typed user's program (tests/typed_user_program.py) and refuses a misspelled distconv name, and
``typing.get_type_hints`` resolves every public callable of the modules the docs import from.

Before: no ``py.typed`` shipped, the PEP 562 ``__getattr__ -> Any`` of the packages and of
``Layer`` made every misspelling pass as Any, the examples' own imports were no re-exports to
``--strict``, and nine public callables (``Trainer.__init__`` among them) raised NameError under
get_type_hints, which pydantic, typeguard and jsonargparse call.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import REPO_ROOT, child_env

PROGRAM = REPO_ROOT / "tests" / "typed_user_program.py"
EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.py"))

#: misspelled names a checker refused once the ``__getattr__ -> Any`` were for run time only:
#: each line, and the words of mypy's error for it
TYPOS = {
    "from distconv import Netwrk": 'Module "distconv" has no attribute "Netwrk"',
    "from distconv.sync import LocalSinc": 'Module "distconv.sync" has no attribute "LocalSinc"',
    "from distconv.deploy import render_manifest": 'has no attribute "render_manifest"',
    "w = FullyConnected(3, 3).wieght": '"FullyConnected" has no attribute "wieght"',
    "e = distconv.CheckpointErorr": 'Module has no attribute "CheckpointErorr"',
}


def mypy_strict(paths: list[Path], cache: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` of ``paths`` against this checkout, as a user's checker reads an
    installed distconv: distconv's own modules are followed silently (their internal errors are
    distconv's, not the user's), its hints all the same. Skips without mypy (the test extra
    installs it): the other tests here need none and run all the same."""
    pytest.importorskip("mypy", reason="the test extra installs mypy")
    env = child_env(MYPYPATH=str(REPO_ROOT))
    command = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
               "--cache-dir", str(cache), "--no-color-output", *map(str, paths)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)


@pytest.mark.slow
@pytest.mark.timeout(300)  # one cold mypy run: 5 s alone, 18 s with 2 cores busy
def test_mypy_strict_passes_the_examples_and_a_typed_program_and_refuses_typos(tmp_path):
    typos = tmp_path / "typos.py"
    typos.write_text(
        "import distconv\nfrom distconv.layers import FullyConnected\n" + "\n".join(TYPOS) + "\n"
    )
    done = mypy_strict([*EXAMPLES, PROGRAM, typos], tmp_path / "cache")
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    wrong = [line for line in errors if not line.startswith(str(typos))]
    assert not wrong, done.stdout  # the examples and the program: clean under --strict
    for line_no, (line, words) in enumerate(TYPOS.items(), start=3):
        said = [e for e in errors if e.startswith(f"{typos}:{line_no}:")]
        assert any(words in e for e in said), (line, done.stdout, done.stderr)
    assert done.returncode == 1


@pytest.mark.timeout(60)
def test_the_typed_program_runs(tmp_path):
    """What type-checks is also a program that works: one step, a checkpoint, the errors."""
    done = subprocess.run(
        [sys.executable, str(PROGRAM), str(tmp_path)],
        capture_output=True, text=True, env=child_env(), timeout=50, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["CheckpointReadError", "NetworkError", "True"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", [path.name for path in EXAMPLES])
def test_each_example_starts_without_its_docstring(example):
    """``__doc__`` is ``str | None``, as pyright says of ``__doc__.splitlines()``: under
    ``python -OO`` it is None, and each example's --help failed with an AttributeError."""
    done = subprocess.run(
        [sys.executable, "-OO", str(REPO_ROOT / "examples" / example), "--help"],
        capture_output=True, text=True, env=child_env(), timeout=100, cwd=REPO_ROOT,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith("usage: ")


#: the callables' hints, evaluated in a fresh process: a type a module imports for checkers
#: only (``TYPE_CHECKING``) is a NameError there, whatever an earlier test left imported
_HINTS_PROBE = """
import importlib, inspect, sys, typing
failed = []
def check(where, function):
    try:
        typing.get_type_hints(function)
    except Exception as exc:
        failed.append(f"{where}: {type(exc).__name__}: {exc}")
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    listed = getattr(module, "__all__", ())
    for attr in [*listed, *(a for a in vars(module) if a[0] != "_" and a not in listed)]:
        obj = getattr(module, attr)
        home = getattr(obj, "__module__", None) or ""
        if home != name and not (attr in listed and home.startswith("distconv")):
            continue  # a helper imported from elsewhere: its own module's to answer for
        if inspect.isfunction(obj):
            check(f"{name}.{attr}", obj)
        elif inspect.isclass(obj):
            for key, member in vars(obj).items():
                member = getattr(member, "__func__", getattr(member, "fget", member))
                if inspect.isfunction(member) and (key[0] != "_" or key == "__init__"):
                    check(f"{name}.{attr}.{key}", member)
print("\\n".join(failed))
"""


def user_facing_modules() -> list[str]:
    """``distconv``, the homes of its names and of what the docstrings say calls raise, and each
    module a user's code imports in the README, the docs' code and the examples."""
    texts = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md"), *EXAMPLES]
    imports = r"(?:from|import) (distconv(?:\.\w+)*)"
    found = {m for text in texts for m in re.findall(imports, text.read_text())}
    found |= {"distconv", "distconv.trainer", "distconv.network", "distconv.parameter"}
    found |= {"distconv.checkpoint_load", "distconv.equivalence", "distconv.gradient_check"}
    return sorted(m for m in found if _is_module(m))


def _is_module(dotted: str) -> bool:
    path = REPO_ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@pytest.mark.timeout(120)
def test_get_type_hints_resolves_every_public_callable_of_the_user_facing_modules():
    modules = user_facing_modules()
    assert {"distconv.checkpoint", "distconv.empty_pass", "distconv.sampler"} <= set(modules)
    done = subprocess.run(
        [sys.executable, "-c", _HINTS_PROBE, *modules],
        capture_output=True, text=True, env=child_env(), timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    failed = set(filter(None, done.stdout.splitlines()))
    assert not failed, "\n".join(sorted(failed))


def test_the_package_ships_its_py_typed_marker():
    """PEP 561: without the marker a user's mypy treats every distconv name as Any."""
    assert (REPO_ROOT / "distconv" / "py.typed").is_file()
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["distconv"]


#: what distconv's run-time ``__getattr__`` answers in a fresh process: a module of the
#: package (what get_type_hints needs of ``distconv.service.ServiceEndpoints``), never a
#: private name's (``__main__`` runs the command line), and a misspelling's usual words
_MODULE_NAMES_PROBE = """
import distconv
print(distconv.service.__name__, distconv.deploy.walk.__name__)
print([hasattr(p, n) for p in (distconv, distconv.deploy) for n in ("__main__", "__pycache__")])
print([getattr(distconv, n, None) for n in ("trainer.x", "no_such_module", "_submodule2")])
distconv.Trainr
"""


@pytest.mark.timeout(60)
def test_distconv_imports_a_public_module_when_asked_and_nothing_else():
    done = subprocess.run(
        [sys.executable, "-c", _MODULE_NAMES_PROBE],
        capture_output=True, text=True, env=child_env(), timeout=50, cwd=REPO_ROOT,
    )  # fmt: skip
    assert done.stdout.splitlines() == [
        "distconv.service distconv.deploy.walk",
        "[False, False, False, False]",
        "[None, None, None]",
    ], done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("AttributeError: module 'distconv' has no attribute 'Trainr'")
