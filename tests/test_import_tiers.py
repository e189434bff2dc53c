"""docs/architecture.md's tiers of imports hold for the code: a module imports only from its own
tier, the ones to its left or the leaves, except where the page names the import and why.

The rule named two exceptions while seven more imports broke it (a data module of the trainer
reading the cli's names, a kernel importing the sync's notes, the sync's give-up words and a
shard's last checkpoint part importing upward), so a contributor who trusted it placed a module
wrongly. This reads the page's table and every import of distconv in the source (``ast``):
``import distconv.x``, ``from distconv.x import y``, ``from distconv import x`` (the module x,
where x is one), relative ones (``from . import x``, ``from ..x import y``), and those inside
functions or under ``TYPE_CHECKING``: a lazy import is still one, and an annotation naming an
upper tier's class ties the module to it as an import does. Reading ``from distconv... import``
alone missed the first and the last two forms: a kernel's ``from distconv import trainer``
passed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
#: the tiers from left to right, as the page's table names them (leaves: any tier imports them)
ORDER = ("leaves", "backend", "plain values", "kernels", "layers", "network / optim", "sync",
         "trainer", "checks", "cli")  # fmt: skip
#: the imports against the rule that the page names, each (importing file, imported module)
EXCEPTIONS = {
    ("sync/ps/cli.py", "distconv.number_text"),
    ("sync/ps/cli.py", "distconv.train_flag_types"),
    ("sync/ps/cli.py", "distconv.transport_flags"),
    ("sync/ps/parts.py", "distconv.checkpoint"),
    ("sync/ps/server.py", "distconv.checkpoint"),
    ("sync/ps/give_up_words.py", "distconv.shard_timeout"),
    ("sync/mpi/watchdog.py", "distconv.shard_timeout"),
    ("held_gradients.py", "distconv.sync.errors"),
    ("parameter.py", "distconv.held_gradients"),
}


def _tiers() -> dict[str, str]:
    """Each path the table names (a file, or a folder ending in ``/``), relative to
    ``distconv/``, with its tier."""
    tiers = {}
    for line in ARCHITECTURE.read_text().splitlines():
        row = re.match(r"\| ([^|]+) \| ([^|]+) \|", line)
        if row and row.group(1).strip() in ORDER:
            for name in re.findall(r"`([^`]+)`", row.group(2)):
                tiers[name] = row.group(1).strip()
    return tiers


def _tier_of(path: str, tiers: dict[str, str]) -> str | None:
    """The tier of ``path`` (relative to ``distconv/``): its own row's, else its folder's."""
    if path in tiers:
        return tiers[path]
    folders = [f for f in tiers if f.endswith("/") and path.startswith(f)]
    return tiers[max(folders, key=len)] if folders else None


def _module_path(module: str) -> str | None:
    """The file of ``distconv.X.Y`` relative to ``distconv/``, where it is one."""
    stem = module.split(".", 1)[1].replace(".", "/") if "." in module else ""
    for path in (f"{stem}.py", f"{stem}/__init__.py"):
        if stem and (REPO_ROOT / "distconv" / path).is_file():
            return path
    return None


def _distconv_imports(file: Path) -> set[str]:
    """The distconv modules ``file`` imports, at its top, inside a function or under
    ``TYPE_CHECKING`` (:func:`_imports_of`)."""
    package = ".".join(file.relative_to(REPO_ROOT).parent.parts)  # an __init__.py's too
    return _imports_of(file.read_text(), package)


def _imports_of(source: str, package: str) -> set[str]:
    """The distconv modules ``source``, a module of the dotted ``package``, imports: each as
    the most specific module its statement names (``from distconv import x``: ``distconv.x``
    where x is a module, else ``distconv``), relative ones resolved against ``package``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x: package; from ..x import y: its parent's x
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                whole = f"{base}.{alias.name}"
                found.add(whole if _module_path(whole) is not None else base)
    return {m for m in found if m.split(".")[0] == "distconv"}


def _upward_imports() -> set[tuple[str, str]]:
    """Every (file, module) where a file the table places imports against the tiers
    (:func:`_against_tiers`)."""
    tiers, found = _tiers(), set()
    for file in sorted((REPO_ROOT / "distconv").rglob("*.py")):
        path = file.relative_to(REPO_ROOT / "distconv").as_posix()
        found |= _against_tiers(path, _distconv_imports(file), tiers)
    return found


def _against_tiers(path: str, modules: set[str], tiers: dict[str, str]) -> set[tuple[str, str]]:
    """Each (``path``, module) of ``modules`` that the file ``path`` may not import: one of a
    tier to the right of its own, and, for a leaf, any module of distconv (the leaves import
    nothing of it, so any tier may import them); none where the table places no ``path``."""
    tier = _tier_of(path, tiers)
    if tier is None:
        return set()
    found = set()
    for module in modules:
        target = _module_path(module)
        other = None if target is None else _tier_of(target, tiers)
        if tier == "leaves" or (other is not None and ORDER.index(other) > ORDER.index(tier)):
            found.add((path, module))
    return found


def test_every_form_of_import_is_read():
    """The reader finds each form a module may import another by, where the page's rule holds
    it: a kernel importing the trainer so passed before (``from distconv import trainer``)."""
    source = (
        "from __future__ import annotations\n"
        "import numpy as np\n"
        "import distconv.sync.errors\n"
        "from distconv import trainer, __version__\n"
        "from . import conv\n"
        "from .. import checkpoint\n"
        "from ..sync.ps import wire\n"
        "from ..network import Network\n"
        "if TYPE_CHECKING:\n"
        "    from distconv.cli import main\n"
        "def f():\n"
        "    from distconv.metrics import MetricsLog\n"
    )
    assert _imports_of(source, "distconv.kernels") == {
        "distconv.sync.errors",
        "distconv.trainer",
        "distconv",
        "distconv.kernels.conv",
        "distconv.checkpoint",
        "distconv.sync.ps.wire",
        "distconv.network",
        "distconv.cli",
        "distconv.metrics",
    }


def test_a_leaf_importing_distconv_is_against_the_tiers():
    """The leaves import nothing of distconv, as the page says: they were skipped as importers,
    so a leaf that imported the backend, or another leaf, passed."""
    tiers = _tiers()
    found = _against_tiers("notes.py", {"distconv.backend", "distconv.names"}, tiers)
    assert found == {("notes.py", "distconv.backend"), ("notes.py", "distconv.names")}
    assert _against_tiers("backend.py", {"distconv.notes"}, tiers) == set()


def test_every_import_against_the_tiers_is_one_the_page_names():
    """No more, no fewer: an exception whose import is gone is dropped from the list too."""
    assert _upward_imports() == EXCEPTIONS


def test_the_page_names_each_exception_in_its_rule():
    """Each file that imports against the tiers is named in the rule's paragraph (where its
    reason is given)."""
    text = ARCHITECTURE.read_text()
    rule = text[text.index("## Tiers of imports") : text.index("| tier | modules | holds |")]
    for path, _ in EXCEPTIONS:
        assert f"`{path}`" in rule, path


def test_the_leaves_import_nothing_of_distconv():
    """The leaves row's modules import nothing of distconv, so any tier may import them."""
    leaves = [name for name, tier in _tiers().items() if tier == "leaves"]
    assert leaves, "the table has no leaves row"
    for name in leaves:
        assert not _distconv_imports(REPO_ROOT / "distconv" / name), name
