"""Deployment: Kubernetes manifests for a job, rendered as dicts and written as YAML.

``distconv-launch k8s`` calls :func:`render_manifests`; ``python -m distconv.deploy k8s`` writes
the checked-in examples. :func:`manifest_problems` holds the checks no schema makes.

The four names below load their modules on first use (PEP 562): importing one module of this
package (:mod:`distconv.deploy.walk`, :mod:`distconv.deploy.check_command`) runs this file, and
loading every check and the renderer here would cost each such import about 150 ms.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from distconv import _submodule

if TYPE_CHECKING:
    from distconv.deploy.check import manifest_problems
    from distconv.deploy.render import dump_yaml, render_manifests, write_manifests

__all__ = ["dump_yaml", "manifest_problems", "render_manifests", "write_manifests"]

#: each public name and the module that defines it
_HOMES = {
    "manifest_problems": "distconv.deploy.check",
    "dump_yaml": "distconv.deploy.render",
    "render_manifests": "distconv.deploy.render",
    "write_manifests": "distconv.deploy.render",
}


# at run time only: a checker that saw ``__getattr__ -> Any`` took every misspelled name as
# Any, so a typo passed ``mypy --strict``
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """``name`` of :data:`__all__`, imported from its module now and kept for next time; or
        a module of this package (``distconv.deploy.render``), imported now, as the eager imports
        this file once made left ``check`` and ``render`` (and the modules they import) set."""
        if name not in _HOMES:
            if (module := _submodule(__name__, name)) is None:  # a public, plain name alone
                raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
            return module
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    """This module's names, the ones not yet imported too."""
    return sorted({*globals(), *__all__})
