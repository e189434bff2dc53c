"""Communicators: mpi4py's, imported only when asked for, or a stand-in for one process."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

from distconv.backend import copy_into, to_host
from distconv.cores import usable_cores
from distconv.kernels.parallel import num_threads
from distconv.messages import exception_line
from distconv.runtime import RuntimeConfigError
from distconv.sync.description import digest, first_difference
from distconv.sync.errors import JobRefused, refusal_text
from distconv.sync.mpi.shared_memory import unlink_segments

log = logging.getLogger("distconv.sync.mpi")
#: thread levels by the names mpi4py's ``rc.thread_level`` uses, lowest first
THREAD_LEVELS = ("single", "funneled", "serialized", "multiple")
_said_why: set[str] = set()
#: how long the communication thread sleeps between tests of a request: short against a
#: piece's transfer, long enough to leave the core to compute meanwhile
POLL_SECONDS = 50e-6
#: the kernel threads a rank runs, where set by hand (:func:`distconv.kernels.parallel.num_threads`)
THREADS_VAR = "DISTCONV_NUM_THREADS"


def check_poll_seconds(value: float | None) -> float | None:
    """``value`` if it is None or a finite number >= 0 (not a bool), else ValueError."""
    return checked_seconds(value, lambda v: v >= 0, "poll_seconds must be a finite number >= 0")


def checked_seconds(
    value: float | None, allowed: Callable[[float], bool], wanted: str
) -> float | None:
    """``value`` if it is None, or a finite real number (not a bool) that ``allowed`` accepts;
    else ValueError: ``wanted`` (what the setting must be), "or None", and what it got."""
    real = isinstance(value, Real) and not isinstance(value, bool)
    if value is not None and not (real and math.isfinite(value) and allowed(value)):
        raise ValueError(f"{wanted} or None, got {value!r}")
    return value


def import_mpi() -> Any | None:
    """``mpi4py.MPI``, or None when mpi4py (or its MPI library) is not installed.

    Importing it initialises MPI (unless ``mpi4py.rc.initialize`` is False); once MPI is
    initialised, the node's MPICH shared-memory files are unlinked here, so that no way this
    rank ends (a SIGKILL included) leaves them in ``/dev/shm``
    (:mod:`~distconv.sync.mpi.shared_memory` says why that is safe).
    """
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    unlink_segments()  # MPI not initialised yet maps none: the next call unlinks it
    return MPI


def library_line(version: str) -> str:
    """The library's name and version: the first line of ``MPI_Get_library_version``'s text,
    its spaces collapsed. Open MPI counts its C string's closing NUL in the text mpi4py
    returns; the byte went into the error line, and grep took the job's log for binary."""
    return " ".join(version.split("\0")[0].split("\n")[0].split())


def job_world(mpi: Any | None) -> Any:
    """The job's communicator for a sync given none: ``MPI.COMM_WORLD``, or where mpi4py (or
    its MPI library) is not importable, :class:`SingleRankComm` (this process alone).

    Raises:
        RuntimeConfigError: an MPI launcher started this process as one of several ranks
            (``PMI_SIZE``, ``OMPI_COMM_WORLD_SIZE``), but mpi4py does not import, or its MPI
            library (another than the launcher's) makes it a world of one: each rank would
            train alone, on its own parameters, and end with status 0 as if the job had been
            one.
    """
    from distconv.distributed import mpi_launcher_size  # it imports the syncs: not at the top

    size = mpi_launcher_size()
    if mpi is not None:
        world = mpi.COMM_WORLD
        if size > 1 and world.Get_size() == 1:
            library = library_line(mpi.Get_library_version())
            raise RuntimeConfigError(
                f"an MPI launcher started this process as one of {size} ranks, but MPI says it "
                f"is alone (rank 0 of 1): mpi4py's MPI library ({library}) is not the "
                "launcher's; run the mpiexec of that library, or reinstall mpi4py for this one"
            )
        return world
    if size > 1:
        started = f"an MPI launcher started this process as one of {size} ranks"
        raise RuntimeConfigError(mpi4py_missing(started))
    return SingleRankComm()


def mpi4py_missing(started: str) -> str:
    """Why the mpi sync trains alone though ``started`` says it has peers ("an MPI launcher
    started this process as one of 2 ranks"): mpi4py does not import, asked again for the
    reason :func:`import_mpi` swallowed, with what to install."""
    try:
        from mpi4py import MPI  # noqa: F401

        why = "it did not import when the sync was built"
    except ImportError as exc:
        why = exception_line(exc)
    return (
        f"mpi4py cannot be imported ({why}), so the mpi sync trains alone, but {started}; "
        "install it for the MPI that started this process (pip install 'distconv[mpi]')"
    )


def threads_allowed(mpi: Any | None) -> bool:
    """Whether a communication thread may call MPI beside the main thread.

    The thread and the main thread never call MPI at the same time: the main thread posts the
    per-step check (an ``Iallgather``) in ``start_step`` and completes it before the step's
    first bucket goes to the thread; its other collectives (metrics, broadcasts) run between
    steps, once every bucket the thread was given is done; the thread is idle until the next
    bucket. That is
    ``MPI_THREAD_SERIALIZED``'s discipline, so SERIALIZED or MULTIPLE will do. Below that
    (``mpi4py.rc.thread_level = "single"`` or ``"funneled"``, or an MPI that grants no more) a
    second thread calling MPI is undefined behaviour, so the caller reduces on the main thread;
    the first refusal is logged, with the reason. Without MPI (one process) any thread may run.

    Args:
        mpi: the ``mpi4py.MPI`` module, or None when there is no MPI.
    """
    if mpi is None:
        return True
    level = mpi.Query_thread()
    if level >= mpi.THREAD_SERIALIZED:
        return True
    name = THREAD_LEVELS[level] if 0 <= level < len(THREAD_LEVELS) else str(level)
    if name not in _said_why:
        _said_why.add(name)
        log.warning(
            "MPI was initialised at thread level %r (below 'serialized'): no communication "
            "thread; gradient buckets are reduced on the main thread. Initialise MPI with "
            "mpi4py.rc.thread_level = 'multiple' (mpi4py's default) to overlap them.",
            name,
        )
    return False


def want_thread(
    requested: bool | None, world_size: int, on_gpu: bool, cores: int, busy: int, mpi: Any
) -> bool:
    """Whether this rank would reduce on a communication thread (the ranks then agree).

    ``requested`` None decides by the machine: on where compute leaves a core free (GPU
    gradients, or more usable ``cores`` than the ``busy`` ones: the node's ranks times their
    kernel threads), for more than one rank. Never below ``MPI_THREAD_SERIALIZED`` (see
    :func:`threads_allowed`).
    """
    if requested is None:
        requested = world_size > 1 and (on_gpu or cores > busy)
    return bool(requested) and threads_allowed(mpi)


def thread_poll_seconds(
    requested: bool | None, comm: Any, mpi: Any, on_gpu: bool, poll_seconds: float | None
) -> float | None:
    """Whether the ranks reduce on a communication thread, and how it polls: None for no thread.

    A collective: every rank calls it, and every rank gets a thread or none (the two paths
    start their collectives in different orders). ``requested`` and ``on_gpu``: see
    :func:`~distconv.sync.mpi.comm.want_thread`; ``poll_seconds`` None: as
    :meth:`NodeShare.poll` chooses. The choice is logged at debug level (``distconv -v``).
    """
    share = NodeShare.here(comm, mpi)
    busy = share.busy(on_gpu)
    wanted = want_thread(requested, comm.Get_size(), on_gpu, share.usable, busy, mpi)
    without = np.array([0.0 if wanted else 1.0])
    comm.Allreduce(mpi.IN_PLACE if mpi else None, without, mpi.SUM if mpi else None)
    seconds = None
    if wanted and without[0] == 0:
        seconds = share.poll(on_gpu) if poll_seconds is None else poll_seconds
    log.debug("communication thread: %s (%s)", thread_words(seconds), share.describe(on_gpu))
    return seconds


def thread_words(seconds: float | None) -> str:
    """What :func:`thread_poll_seconds`'s answer means, for its debug line."""
    if seconds is None:
        return "none"
    if seconds == 0:
        return "waits in MPI_Wait (poll 0 s)"
    return f"polls every {seconds:g} s"


@dataclass(frozen=True)
class NodeShare:
    """The cores of this rank's node that the job's ranks there may take, and their kernel
    threads: what the communication thread's choice goes by."""

    #: the cores this process may use (:func:`distconv.cores.usable_cores`)
    usable: int
    #: the job's ranks on this node
    ranks: int
    #: each rank's kernel threads (:func:`distconv.kernels.parallel.num_threads`)
    threads: int
    #: whether ``threads`` was set by hand (``DISTCONV_NUM_THREADS``, which
    #: ``distconv-launch --threads`` sets), not sized from the cores
    by_hand: bool

    @classmethod
    def here(cls, comm: Any, mpi: Any) -> NodeShare:
        """This rank's (a collective: it counts the ranks on the node)."""
        by_hand = bool(os.environ.get(THREADS_VAR))  # num_threads reads "" as unset too
        return cls(usable_cores(), ranks_on_node(comm, mpi), num_threads(), by_hand)

    def busy(self, on_gpu: bool) -> int:
        """The job's cores that compute: each rank's kernel threads, or one per rank whose
        gradients are on a GPU (its kernel threads do not compute)."""
        return self.ranks * (1 if on_gpu else self.threads)

    def poll(self, on_gpu: bool) -> float:
        """0 (wait in ``MPI_Wait``, which spins) where the usable cores hold one for each
        rank's thread beside those that compute, else :data:`POLL_SECONDS`: no spinning
        thread takes a core the kernels compute on. Where the kernel threads were set by hand
        it always polls: the docs tell jobs that share a host to set them so that their sums
        fit its cores, and the cores above this job's may be another job's, which a thread
        spinning there would take (the thread still overlaps, sleeping between its tests)."""
        if self.by_hand:
            return POLL_SECONDS
        return 0.0 if self.usable - self.busy(on_gpu) >= self.ranks else POLL_SECONDS

    def describe(self, on_gpu: bool) -> str:
        """The numbers behind the choice, for its debug line."""
        how = "set by hand" if self.by_hand else "from the cores"
        return (
            f"usable cores {self.usable}, busy {self.busy(on_gpu)}; "
            f"ranks on this node {self.ranks}, kernel threads {self.threads} each ({how})"
        )


def rank0_names(comm: Any, names: Sequence[str]) -> tuple[str, ...]:
    """Rank 0's ``names`` on every rank (a collective): one order for all of them."""
    joined = allgather_bytes(comm, "\n".join(names).encode())[0].decode()
    return tuple(joined.split("\n")) if joined else ()


def allgather_bytes(comm: Any, data: bytes) -> list[bytes]:
    """Every rank's ``data``, in rank order (raw bytes: nothing is pickled)."""
    sizes = np.zeros(comm.Get_size(), dtype=np.int64)
    comm.Allgather(np.array([len(data)], dtype=np.int64), sizes)
    out = np.zeros(int(sizes.sum()), dtype=np.uint8)
    comm.Allgatherv(np.frombuffer(data, dtype=np.uint8), [out, sizes.tolist()])
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [out[a:b].tobytes() for a, b in zip(bounds[:-1], bounds[1:])]


def allgather_json(comm: Any, ours: Any) -> list[Any]:
    """Every rank's ``ours`` (a JSON value), in rank order (a collective): each rank sends its
    JSON text with sorted keys, so equal mappings travel as equal bytes."""
    texts = allgather_bytes(comm, json.dumps(ours, sort_keys=True).encode())
    return [json.loads(text) for text in texts]


class JobMismatch(JobRefused):
    """Ranks run different jobs. Every rank raises it alike, once the collectives that found
    it are complete on all of them: none waits for another."""

    raised_alike = True


class WireRefused(JobRefused):
    """A reduced 16-bit wire holds NaN or infinity
    (:meth:`~distconv.sync.mpi.buckets.Bucket.check_wire`). Every rank holds the same bits and
    raises it alike, at the same bucket."""

    raised_alike = True


def same_job(comm: Any, rank: int, ours: Mapping[str, Any]) -> None:
    """Compare a digest of ``ours`` across ranks; on a mismatch, name the difference.

    ``ours``: a description as sent (:func:`~distconv.sync.description.as_sent`), made before
    any exchange: a value JSON cannot write, refused there, is refused before the job check.

    Raises:
        JobMismatch: naming this rank, the first rank that differs, and the first differing key
            (or a rank that could not set up: :func:`~distconv.sync.errors.refusal_text`).
    """
    digests = allgather_bytes(comm, digest(ours).encode())
    if len(set(digests)) == 1:
        return
    other, theirs = description_from(comm, ours, [d == digests[rank] for d in digests])
    raise JobMismatch(refusal_text(rank, other, ours, theirs, first_difference(ours, theirs)))


def bcast_in_place(comm: Any, array: Any) -> None:
    """Overwrite ``array`` (host or device) with rank 0's, through a host buffer.

    The buffer keeps ``array``'s shape: ``ascontiguousarray`` made a 0-d array (Adam's step
    count) 1-d, which numpy assigns back into 0-d but cupy refuses ("Out shape is mismatched").
    """
    host = np.asarray(to_host(array), order="C")
    comm.Bcast(host.reshape(-1).view(np.uint8), root=0)
    copy_into(array, host)


def ranks_on_node(comm: Any, mpi: Any) -> int:
    """How many of ``comm``'s ranks share this node (a collective; 1 without MPI)."""
    if mpi is None:
        return 1
    node = comm.Split_type(mpi.COMM_TYPE_SHARED)
    try:
        return node.Get_size()
    finally:
        node.Free()


def description_from(comm: Any, ours: Any, same: Sequence[bool]) -> tuple[int, Any]:
    """The first rank whose ``same`` is False, and its ``ours`` (a JSON value): gathers every
    rank's JSON, so call it on every rank."""
    every = allgather_json(comm, ours)
    other = next(r for r, alike in enumerate(same) if not alike)
    return other, every[other]


class _Done:
    """A request that is already complete (what :class:`SingleRankComm` returns)."""

    def Wait(self) -> None:  # noqa: N802 - mpi4py's spelling
        """Nothing to wait for."""

    def Test(self) -> bool:  # noqa: N802
        return True


class SingleRankComm:
    """The few communicator calls MPISync makes, for one process and without MPI.

    Collectives over one rank copy the send buffer into the receive buffer (or do nothing for
    ``IN_PLACE``, which is ``None`` here).
    """

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1

    def Allreduce(self, send: Any, recv: Any, op: Any = None) -> None:  # noqa: N802
        if send is not None:
            recv[...] = send

    def Iallreduce(self, send: Any, recv: Any, op: Any = None) -> _Done:  # noqa: N802
        self.Allreduce(send, recv, op)
        return _Done()

    def Allgather(self, send: Any, recv: Any) -> None:  # noqa: N802
        recv.reshape(-1)[...] = np.asarray(send).reshape(-1)

    def Allgatherv(self, send: Any, recv: Any) -> None:  # noqa: N802
        recv[0][...] = send

    def Ialltoall(self, send: Any, recv: Any) -> _Done:  # noqa: N802
        self.Allgather(send, recv)
        return _Done()

    Iallgather = Ialltoall

    def Bcast(self, buf: Any, root: int = 0) -> None:  # noqa: N802
        """Rank 0 already holds the value."""

    def Barrier(self) -> None:  # noqa: N802
        """Nothing to wait for."""

    def Dup(self) -> SingleRankComm:  # noqa: N802
        return self

    def Free(self) -> None:  # noqa: N802
        """Nothing to release."""

    def Abort(self, code: int = 1) -> None:  # noqa: N802
        os._exit(code)
