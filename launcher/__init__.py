"""``distconv-launch``: start a distconv job on this host, under mpiexec, or on Kubernetes.

This folder is installed as the package ``distconv.launch`` (setuptools ``package-dir``), so
nothing called ``launcher`` lands in site-packages. Its parts:

- :mod:`.commands` and :mod:`.mpi`: pure builders of commands and environments;
- :mod:`.supervisor`: runs a gang of children with prefixed output, restarts and signals;
- :mod:`.cli`: the command line (``local``, ``mpi``, ``k8s``).
"""

from .cli import main

__all__ = ["main"]
