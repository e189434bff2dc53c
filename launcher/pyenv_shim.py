"""Which file a pyenv shim runs: ``~/.pyenv/shims/distconv`` (``$(which distconv)`` where pyenv
manages Python) is a small script that has pyenv pick the Python version of the moment (its
``PYENV_VERSION``, a ``.python-version`` file, the global one) and run that version's
``distconv``. The shim is the same file for every version, so only ``pyenv which`` tells which
install's ``distconv`` it runs (:func:`launcher.train_words.is_distconv`).
"""

from __future__ import annotations

import os
import subprocess

#: seconds ``pyenv which`` may take: it reads a few files and runs no Python; a pyenv that does
#: not answer in that time leaves the shim a program of the user's, run as it is
WHICH_BOUND = 2.0


def shim_root(path: str) -> str | None:
    """The pyenv root whose shim ``path`` (links resolved) is: a file in ``$PYENV_ROOT/shims``
    (``~/.pyenv/shims`` without it, pyenv's default) that runs ``pyenv exec``, as every shim
    pyenv writes does; None for any other file."""
    root = os.path.realpath(os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv"))
    real = os.path.realpath(path)
    if os.path.dirname(real) != os.path.join(root, "shims"):
        return None
    try:
        with open(real, "rb") as file:
            text = file.read(4096)
    except OSError:
        return None
    return root if b"pyenv" in text and b" exec " in text else None


def shim_target(path: str) -> str | None:
    """The file the pyenv shim ``path`` runs here (``pyenv which NAME`` in this environment and
    folder, which the launch's children inherit), or None: ``path`` is no shim
    (:func:`shim_root`), or pyenv names none, fails or takes over :data:`WHICH_BOUND`."""
    from .interrupt import run_captured  # a stop signal never leaves pyenv running

    root = shim_root(path)
    if root is None:
        return None
    pyenv = os.path.join(root, "libexec", "pyenv")  # the program every shim execs
    name = os.path.basename(os.path.realpath(path))
    try:
        done = run_captured([pyenv, "which", name], timeout=WHICH_BOUND)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return found if done.returncode == 0 and os.path.isabs(found) else None
