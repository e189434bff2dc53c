"""The check's own descriptors that would keep the FIFO it reads open for ever (part of
``distconv check-manifests``, :mod:`distconv.deploy.check_command`): a FIFO or pipe ends for
its reader only when every writer has closed it, so one the check's own process was handed
open to write (``exec 3<>fifo; exec distconv check-manifests fifo``, or ``- < fifo``) would be
read for ever, and is refused at once, naming that descriptor.

Only this process is looked at, by ``fstat`` and ``fcntl`` of its own descriptors. Other
processes are not: ``/proc`` shows which of them hold a FIFO, not which read it (a shell
hands its descriptors to every child, and they read nothing), so a look at them refused valid
input, and a real reader it found could as well open the FIFO after the look. A FIFO another
process reads is instead named as a possibility where the check's wait ends without it.
"""

from __future__ import annotations

import fcntl
import os
import stat

#: where this process's descriptors are listed (Linux; ``/dev/fd`` on macOS and the BSDs)
_OWN_FDS = ("/proc/self/fd", "/dev/fd")
#: the access modes (``O_ACCMODE`` of the open flags) a descriptor writes a FIFO with
_WRITING = (os.O_WRONLY, os.O_RDWR)
#: why a FIFO no writer opened within the wait (its seconds) is refused: the other way it is
#: left empty is named, not guessed at (a reader elsewhere is not looked for: see the module)
NO_WRITER = (
    "a FIFO nothing opened to write in {:g} s (or another process read what was written: "
    "a FIFO gives each byte to one reader)"
)
#: the note on a FIFO whose writer has it open and has written nothing within the wait
SILENT_WRITER = (
    "still waiting: a writer has it open and has written nothing yet "
    "(one that holds it both ways, as exec 3<>FIFO does, never ends it)"
)
#: why text read from a FIFO with a name may be cut anywhere (each byte goes to one reader)
SHARED = " (a FIFO: another process that reads it too takes some or all of what is written)"
#: why a FIFO this process was handed open to write is refused
_ENDLESS = "it would be read for ever, a writer's close never ending it"


def own_writers(fd: int) -> str | None:
    """Why the FIFO or pipe this process reads on descriptor ``fd`` (stdin too) would be read
    for ever: this process holds it open to write on another descriptor it was handed (not
    close-on-exec), so no writer's close ever ends it. None where it does not, or ``fd`` is no
    FIFO. A descriptor this process opened itself is close-on-exec (PEP 446), such as a
    thread's writer, which closes: it is not one."""
    held = os.fstat(fd)
    if not stat.S_ISFIFO(held.st_mode):
        return None
    writes = [n for n in _own_descriptors() if n != fd and _handed_writer(n, held)]
    if writes:
        numbers = ", ".join(map(str, writes))
        return f"a FIFO this check holds open to write too (fd {numbers}): {_ENDLESS}"
    return None


def stream_writers(stream: object) -> str | None:
    """:func:`own_writers` of the descriptor of ``stream`` (``sys.stdin``); None where it has
    none (an in-memory stdin)."""
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return own_writers(fd)


def shared_hint(*names: str) -> str:
    """:data:`SHARED` where one of ``names`` (paths; ``-`` is stdin) is a FIFO with a name,
    which any process may open and read too; none for files, or for an anonymous pipe
    (``<(render)``), which no process can open by name. Told only after the text read failed
    or held nothing: a guess at the other reader, not looked for (see the module), is not made."""
    for name in names:
        try:
            held = os.stat(0 if name == "-" else name)
        except OSError:  # gone since it was read: nothing to say of it
            continue
        if stat.S_ISFIFO(held.st_mode) and not _anonymous(held):
            return SHARED
    return ""


def _anonymous(held: os.stat_result) -> bool:
    """Whether ``held`` is an anonymous pipe: on the file system every pipe is on."""
    read, write = os.pipe()
    try:
        return os.fstat(read).st_dev == held.st_dev
    finally:
        os.close(read)
        os.close(write)


def _own_descriptors() -> list[int]:
    """The numbers of this process's open descriptors, in order; none where they cannot be
    listed (the listing's own descriptor, gone by then, is no FIFO: see the caller)."""
    for folder in _OWN_FDS:
        try:
            return sorted(int(name) for name in os.listdir(folder) if name.isdigit())
        except OSError:
            continue
    return []


def _handed_writer(fd: int, fifo: os.stat_result) -> bool:
    """Whether this process's descriptor ``fd`` holds ``fifo`` (the same device and inode,
    whatever its name) open to write, and was handed down (not close-on-exec)."""
    try:
        held = os.fstat(fd)
        if (held.st_dev, held.st_ino) != (fifo.st_dev, fifo.st_ino):
            return False
        if fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC:
            return False
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE in _WRITING
    except OSError:  # closed meanwhile (by another thread): it holds nothing
        return False
