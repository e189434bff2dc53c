"""The host lists a batch system hands ``mpiexec`` without ``-H`` or a hostfile flag, and whether
every host one names is this machine (:func:`launcher.this_host.is_this_host`, the one judge of
a host the launch names): an allocation of this host alone runs its ranks here, on this host's
files, as ``-H localhost:2`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .this_host import all_here

#: variables by which a batch system hands mpiexec its hosts without ``-H`` or a hostfile flag
#: (Hydra and Open MPI read them): the ranks then run on nodes whose files may differ
SCHEDULER_HOSTS = (
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "PBS_NODEFILE",
    "LSB_HOSTS",
    "LSB_MCPU_HOSTS",
    "PE_HOSTFILE",
    "COBALT_NODEFILE",
    "HYDRA_HOST_FILE",
    "OMPI_MCA_orte_default_hostfile",
    "PRTE_MCA_prte_default_hostfile",
)
#: variables that say a batch system runs this job (with :data:`SCHEDULER_HOSTS`): mpiexec then
#: starts its daemons through it (srun, PBS's tm, blaunch, qrsh), not through ssh
BATCH_JOB_VARS = (
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "PBS_JOBID",
    "PBS_ENVIRONMENT",
    "LSB_JOBID",
    "COBALT_JOBID",
    "LOADL_STEP_ID",
    "FLUX_JOB_ID",
)
#: those of :data:`SCHEDULER_HOSTS` that are the MPIs' own default hostfiles, which a user sets
#: outside any batch job: mpiexec still starts its daemons with ssh there
MPI_DEFAULT_HOSTS = (
    "HYDRA_HOST_FILE",
    "OMPI_MCA_orte_default_hostfile",
    "PRTE_MCA_prte_default_hostfile",
)
#: those of :data:`SCHEDULER_HOSTS` that hold the host names themselves, comma-separated
SLURM_LISTS = ("SLURM_JOB_NODELIST", "SLURM_NODELIST")
#: the most of a node file read (PBS writes a line per slot): a longer one counts as other hosts
NODEFILE_BOUND = 1 << 20


def _file_text(value: str) -> str | None:
    """The text of the host file ``value`` (:data:`NODEFILE_BOUND` at most); None where it
    cannot be read here (a login node's path) or is longer: the ranks' hosts are unknown."""
    try:
        with open(value, encoding="utf-8", errors="replace") as file:
            text = file.read(NODEFILE_BOUND + 1)
    except OSError:
        return None
    return text if len(text) <= NODEFILE_BOUND else None


def _slurm(value: str) -> list[str] | None:
    # 'node1,node2' or 'node[1-2]': plain names are read, a range is not
    return None if "[" in value else value.split(",")


def _nodefile(value: str) -> list[str] | None:
    # PBS's $PBS_NODEFILE (a line per slot) and Cobalt's $COBALT_NODEFILE: one host a line
    text = _file_text(value)
    return None if text is None else text.split()


def _sge_hostfile(value: str) -> list[str] | None:
    # SGE's $PE_HOSTFILE: a line per host, 'host slots queue processors'; a line not so
    # written (no slot count after the host) leaves the hosts unknown
    text = _file_text(value)
    if text is None:
        return None
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not all(len(words) >= 2 and words[1].isdigit() for words in lines):
        return None
    return [words[0] for words in lines]


def _lsf_hosts(value: str) -> list[str] | None:
    # LSF's $LSB_HOSTS: 'hostA hostA hostB', a host a slot
    return value.split()


def _lsf_mcpu(value: str) -> list[str] | None:
    # LSF's $LSB_MCPU_HOSTS: 'hostA 2 hostB 4', each host with its slot count
    words = value.split()
    return words[::2] if len(words) % 2 == 0 else None


#: how each variable of :data:`SCHEDULER_HOSTS` read here names its hosts; the rest (the MPIs'
#: own hostfiles, whose lines take options) are not read: they count as other hosts
_READERS: dict[str, Callable[[str], list[str] | None]] = {
    **dict.fromkeys(SLURM_LISTS, _slurm),
    "PBS_NODEFILE": _nodefile,
    "LSB_HOSTS": _lsf_hosts,
    "LSB_MCPU_HOSTS": _lsf_mcpu,
    "PE_HOSTFILE": _sge_hostfile,
    "COBALT_NODEFILE": _nodefile,
}


def scheduler_hosts_here(name: str, value: str) -> bool:
    """Whether the batch system's host list ``value`` of the variable ``name`` (one of
    :data:`SCHEDULER_HOSTS`) names this host alone (:func:`launcher.this_host.all_here`):
    Slurm's plain node list, PBS's node file, LSF's ``LSB_HOSTS`` and ``LSB_MCPU_HOSTS``,
    SGE's ``PE_HOSTFILE`` (a line per host: ``host slots queue processors``) and Cobalt's
    ``COBALT_NODEFILE`` (a host a line). A list not read here (a range, a file that cannot be
    read, another system's) is False: its ranks may run elsewhere."""
    reader = _READERS.get(name)
    hosts = reader(value) if reader is not None else None
    return bool(hosts) and all_here(set(hosts))


def in_batch_job(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` is a batch system's job's (:data:`BATCH_JOB_VARS`, or a batch
    system's host list of :data:`SCHEDULER_HOSTS`), whose mpiexec starts its daemons through
    that system; an MPI's default hostfile (:data:`MPI_DEFAULT_HOSTS`) is no batch job."""
    lists = (name for name in SCHEDULER_HOSTS if name not in MPI_DEFAULT_HOSTS)
    return any(environ.get(name) for name in (*BATCH_JOB_VARS, *lists))
