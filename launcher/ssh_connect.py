"""A bound on ssh's connect for an mpi launch over other hosts.

mpiexec starts its daemons on the other hosts with ssh (Hydra's proxies, Open MPI's
``prted``). ssh waits for a host that takes the connection but never answers (a hung sshd, a
firewall that drops the packets) for as long as the kernel's connect timeout, about two
minutes, or forever once connected: the launch said nothing meanwhile. Where the user has not
said otherwise, mpiexec's environment bounds ssh's connect and greeting at
:data:`CONNECT_SECONDS` (``-o ConnectTimeout``), after which mpiexec fails with ssh's own
line (``Connection timed out during banner exchange``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from .batch_hosts import in_batch_job
from .hostfile import Host
from .this_host import all_here

#: seconds ssh may take to connect and read the host's greeting: a sshd's reverse DNS lookup
#: of the client (often two 5 s tries) fits, a host that never answers costs no more
CONNECT_SECONDS = 20
#: Hydra's: the program it starts its proxies with, and the options it adds to its command
HYDRA_LAUNCHERS = ("HYDRA_LAUNCHER", "HYDRA_BOOTSTRAP")
HYDRA_EXECS = ("HYDRA_LAUNCHER_EXEC", "HYDRA_BOOTSTRAP_EXEC")
HYDRA_ARGS = "HYDRA_LAUNCHER_EXTRA_ARGS"
#: the same two as Hydra's config files set them (``-launcher rsh``), which it reads as its
#: command line: its launcher's words, and its program's
HYDRA_OPTIONS = {"launcher": 0, "bootstrap": 0, "launcher-exec": 1, "bootstrap-exec": 1}
#: Open MPI's ssh options: 5's (PRRTE's ``plm_ssh_args``) and 4's (``plm_rsh_args``). The
#: launcher tells only the MPI, not its version, so both are set: each reads its own
OPENMPI_ARGS = ("PRTE_MCA_plm_ssh_args", "OMPI_MCA_plm_rsh_args")
#: the same parameters (and the program) as a user sets them: in the environment, or in an
#: MCA parameter file (:func:`_mca_files`), which the environment would override
OPENMPI_PARAMS = ("plm_ssh_args", "plm_rsh_args", "plm_ssh_agent", "plm_rsh_agent")


def ssh_connect_bound(
    flavor: str, mpiexec: str, hosts: Sequence[Host], environ: Mapping[str, str]
) -> dict[str, str]:
    """The variables to add to mpiexec's environment ``environ`` so that its ssh to each other
    host gives up after :data:`CONNECT_SECONDS`; none where no host of ``hosts`` is another
    (:func:`launcher.this_host.all_here`: mpiexec starts this host's own ranks itself), in a
    batch job (its mpiexec starts the daemons through the batch system, to which ssh's options
    mean something else: ``-o`` is srun's output file), where the program that starts them is
    not ssh, or where the user has set the options or that program (in the environment, in
    Hydra's config files, in Open MPI's parameter files), which are left as they are.

    Args:
        flavor: ``"mpich"`` or ``"openmpi"``.
        mpiexec: the mpiexec to run (the MPI's own config or parameter files are found
            beside it).
        hosts: the launch's ``-H`` or hostfile hosts.
        environ: the environment mpiexec runs with.
    """
    if not hosts or all_here(h.name for h in hosts) or in_batch_job(environ):
        return {}
    if flavor == "mpich":
        launchers = [environ[n] for n in HYDRA_LAUNCHERS if environ.get(n)]
        programs = [environ[n] for n in HYDRA_EXECS if environ.get(n)]
        for path in _hydra_config_files(mpiexec, environ):
            words = _hydra_settings(path)
            launchers += words[0]
            programs += words[1]
        if HYDRA_ARGS in environ or any(launcher != "ssh" for launcher in launchers):
            return {}
        if not all(_is_ssh(program) for program in programs):
            return {}  # an rsh, say, which -o makes fail: a launch that ran would fail
        return {HYDRA_ARGS: f"-o ConnectTimeout={CONNECT_SECONDS}"}
    given = [
        (name, environ[p + name])
        for p in ("PRTE_MCA_", "OMPI_MCA_")
        for name in OPENMPI_PARAMS
        if p + name in environ
    ]
    for path in _mca_files(mpiexec, environ):
        given += _ssh_params(path)
    if any(name.endswith("_args") or not _is_ssh(value) for name, value in given):
        return {}  # the user's options, or a program other than ssh (one named for it is)
    if shutil.which("ssh", path=environ.get("PATH")) is None:  # Open MPI falls back to rsh
        return {}
    # ConnectTimeout and its seconds apart by a tab, which ssh reads as it reads '=' and at
    # which neither Open MPI splits the options (at spaces only): Open MPI 5 passes the
    # parameter on to its daemons, which start those of further hosts (its tree spawn, past
    # routed_radix's 64 hosts), cut at its first '=', and their ssh refused -o ConnectTimeout
    return dict.fromkeys(OPENMPI_ARGS, f"-x -o ConnectTimeout\t{CONNECT_SECONDS}")


def _is_ssh(program: str) -> bool:
    # a wrapper of the user's that is named for ssh takes ssh's options; rsh does not
    return "ssh" in os.path.basename(program)


def _mca_files(mpiexec: str, environ: Mapping[str, str]) -> list[Path]:
    """Open MPI's MCA parameter files: the user's and its installation's (under the prefix
    of ``mpiexec``, as run and with its links resolved, and a distribution's /etc/openmpi)."""
    home = Path(environ.get("HOME") or "~").expanduser()
    files = [home / ".prte" / "mca-params.conf", home / ".openmpi" / "mca-params.conf"]
    for etc in {Path(p).parent.parent / "etc" for p in (mpiexec, os.path.realpath(mpiexec))}:
        files += [etc / "prte-mca-params.conf", etc / "openmpi-mca-params.conf"]
    return [*files, Path("/etc/openmpi/openmpi-mca-params.conf")]


def _ssh_params(path: Path) -> list[tuple[str, str]]:
    """The settings of ssh's options or program in the MCA parameter file ``path`` (a line
    ``plm_ssh_args = -p 2222``), as (name, value); none where it cannot be read."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        name, _, value = line.split("#", 1)[0].partition("=")
        if name.strip() in OPENMPI_PARAMS:
            found.append((name.strip(), value.strip()))
    return found


def _hydra_config_files(mpiexec: str, environ: Mapping[str, str]) -> list[Path]:
    """Hydra's config files: ``HYDRA_CONFIG_FILE``'s, else the user's
    ``~/.mpiexec.hydra.conf``, and its installation's (under the prefix of ``mpiexec``, as run
    and with its links resolved, a distribution's /etc/mpich, the mpich wheel's /opt/mpich)."""
    named = environ.get("HYDRA_CONFIG_FILE")
    home = Path(environ.get("HOME") or "~").expanduser()
    files = [Path(named) if named else home / ".mpiexec.hydra.conf"]
    for etc in {Path(p).parent.parent / "etc" for p in (mpiexec, os.path.realpath(mpiexec))}:
        files.append(etc / "mpiexec.hydra.conf")
    return [
        *files,
        Path("/etc/mpich/mpiexec.hydra.conf"),
        Path("/opt/mpich/etc/mpiexec.hydra.conf"),
    ]


def _hydra_settings(path: Path) -> tuple[list[str], list[str]]:
    """The launchers and the programs that the Hydra config file ``path`` names (its words
    are mpiexec's options: ``-launcher rsh``, ``--launcher-exec /usr/bin/rsh``); none where it
    cannot be read."""
    try:
        words = path.read_text(errors="replace").split()
    except OSError:
        return [], []
    found: tuple[list[str], list[str]] = ([], [])
    for option, value in zip(words, words[1:]):
        which = HYDRA_OPTIONS.get(option.lstrip("-")) if option.startswith("-") else None
        if which is not None:
            found[which].append(value)
    return found
