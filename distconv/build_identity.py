"""What this process runs: the release (``__version__``) and a digest of its source files.

``__version__`` names a release, but every build of a checkout says the same one, and under
Kubernetes two builds pushed under one image tag run side by side (a node keeps its cached image
with ``imagePullPolicy: IfNotPresent``). The digest tells them apart: SHA-256 over every ``.py``
file of the ``distconv`` package and of the launcher, by path and content, so two processes with
the same digest run the same Python code (compiled kernels, numpy and MPI are not in it). Only
files Python could import count: what an editor or a notebook leaves beside them does not. A
package imported from a zip file is read there.

The launcher is the checkout's ``launcher/`` folder beside ``distconv/``, or, installed, the
package's own ``launch/`` folder (``pyproject.toml`` maps one to the other): both are read as
``distconv/launch/...``, so a checkout and its installed wheel share a digest.

It is read once per process, on first use, never at import: some 300 files, about 3 MB, in a
few milliseconds (hashing and reading; a cold page cache costs what reading them costs).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
from collections.abc import Iterator
from typing import TYPE_CHECKING

from distconv import __version__

if TYPE_CHECKING:
    from importlib.abc import Traversable

#: the package's folder, in a zip file too (an install zipped, or a zipapp): read through
#: importlib's resources, whose paths a zip file's import gives as ``zipfile.Path``
PACKAGE: Traversable = importlib.resources.files("distconv")


def _modules(folder: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    """The files under ``folder`` that Python could import as modules, as ``(their path
    relative to it, the file)``: ``.py`` files whose every name is an identifier, not in a
    linked folder. What an editor or a notebook leaves beside them is no code and is left out:
    an Emacs lock file (``.#optim.py``, a link to nowhere, which no read can open), a Jupyter
    copy in ``.ipynb_checkpoints/``, ``optim (copy).py``."""
    for entry in folder.iterdir():
        name = entry.name
        if entry.is_dir():
            if name.isidentifier() and not getattr(entry, "is_symlink", bool)():
                yield from _modules(entry, f"{prefix}{name}/")
        elif name.endswith(".py") and name[:-3].isidentifier() and entry.is_file():
            yield f"{prefix}{name}", entry


def _sources() -> Iterator[tuple[str, Traversable]]:
    """Each source file as ``(its name in the digest, the file)``, in the digest's order. The
    launcher is the checkout's ``launcher/`` beside the package where it has no ``launch/``."""
    found = {f"distconv/{name}": p for name, p in _modules(PACKAGE)}
    checkout_launcher = PACKAGE.parent / "launcher"  # a Path, or a zip file's
    if (checkout_launcher / "__init__.py").is_file() and not (PACKAGE / "launch").is_dir():
        for name, p in _modules(checkout_launcher):
            found[f"distconv/launch/{name}"] = p
    for name in sorted(found):
        yield name, found[name]


@functools.cache
def build_digest() -> str:
    """The SHA-256 (hex) of this process's distconv source: each ``.py`` file's name (as
    ``distconv/...``), its size and its bytes, in name order. Computed once, on first use."""
    digest = hashlib.sha256()
    for name, path in _sources():
        data = path.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def build_id() -> str:
    """This process's distconv: ``__version__`` and the first 16 hex digits of
    :func:`build_digest` as a local version (``0.1.0+3f2a9c0d41b7e655``). Equal on two
    processes: they run the same release and the same source; a comment edited differs."""
    return f"{__version__}+{build_digest()[:16]}"


def digest_bits() -> int:
    """The first 64 bits of :func:`build_digest` as a signed 64-bit integer, as the MPI
    start-up record carries them (:mod:`distconv.sync.mpi.identity`)."""
    return int.from_bytes(bytes.fromhex(build_digest()[:16]), "big", signed=True)
