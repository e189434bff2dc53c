"""``distconv-launch``: start a distconv job on this host, under mpiexec, or on Kubernetes.

This folder is installed as the package ``distconv.launch`` (setuptools ``package-dir``), so
nothing called ``launcher`` lands in site-packages. Its parts:

- :mod:`.commands` and :mod:`.mpi`: pure builders of commands and environments;
- :mod:`.supervisor`: runs a gang of children with prefixed output, restarts and signals;
- :mod:`.cli`: the command line (``local``, ``mpi``, ``k8s``).
"""

import os
import sys

from .interrupt import defer

if os.path.basename(sys.argv[0]) == "distconv-launch":  # the installed command, before cli's
    defer()  # imports: a Ctrl-C or SIGTERM there is kept for main (launcher.interrupt)


def main(argv=None) -> int:
    """Run ``distconv-launch`` (:func:`.cli.main`); returns the exit status."""
    from .cli import main as run

    return run(argv)


__all__ = ["main"]
