"""Why the kernel cannot start a program that is there: its ``#!`` interpreter, its loader, its
execute bit or its format.

``execve`` says "No such file or directory" of a script that is there when the interpreter its
``#!`` line names is missing (a script saved with Windows line ends names ``'/bin/sh\\r'``),
"Permission denied" of a file without its execute bit (or whose interpreter is a folder, or has
none), and "Exec format error" of a script without a ``#!`` line (or with one behind a Windows
editor's byte-order mark); of each interpreter's own ``#!`` line alike, as deep as the kernel
follows them.
:func:`not_started` turns such an error into the reason; :func:`start_problem` finds the first
two, and a ``#!`` behind a byte-order mark, before the program is started by another process
(``mpiexec``'s ranks, whose ``execvp`` runs a script without a ``#!`` line with ``/bin/sh``),
whose own message would repeat the bare "No such file".
"""

from __future__ import annotations

import codecs
import errno
import functools
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from distconv.files import describe_os_error
from distconv.messages import shell_word

from .shown import shown

if TYPE_CHECKING:
    from .commands import Program


def _located(program: str, path: str | None) -> str | None:
    """The file ``program`` names, looked up on ``path`` as exec does; None where none is."""
    found = program if os.sep in program else shutil.which(program, path=path)
    return found if found and os.path.isfile(found) else None


def not_a_file(first: str) -> str:
    """Why ``first``, a path or ``.py`` file named after ``--``, is no file to run: a folder
    (``-- ./data``, which was said not to exist, though it is there), or nothing there."""
    what = "script" if first.endswith(".py") else "program"
    if os.path.isdir(first):
        return f"{shown(first)} is a folder, not a {what}"
    return f"{what} {shown(first)} does not exist"


def missing_here(first: str) -> str | None:
    """Why ``first``, the first word after ``--`` (not train's), names no file to run on this
    host (:func:`not_a_file`, or no program on ``PATH``); None where it names one."""
    from .train_words import names_a_path, not_a_program

    if names_a_path(first):
        return None if os.path.isfile(first) else not_a_file(first)
    return not_a_program(first) if shutil.which(first) is None else None


#: the bytes of a file the kernel reads to tell its format (BINPRM_BUF_SIZE): the ``#!`` line
#: it reads is as long, and an ELF header's e_machine is at bytes 18 and 19
_HEAD = 256


def _head(found: str) -> bytes:
    """The first :data:`_HEAD` bytes of ``found``, read whole (empty where it cannot be read),
    not by ``readline``, which stops at a 0x0a byte: an ELF header may hold one before its
    e_machine ends (that of ``EM_MIPS_RS3_LE`` is 10)."""
    try:
        with open(found, "rb") as file:
            return file.read(_HEAD)
    except OSError:
        return b""


def _interpreter(head: bytes) -> str | None:
    """The interpreter the ``#!`` line that starts ``head`` (a file's :func:`_head`) names
    (None without one): the callers read the file once and ask it every question, so no two
    answers are about two versions of a file being written."""
    if not head.startswith(b"#!"):
        return None
    # the kernel takes the interpreter up to a space, a tab or the newline (a '\r' is kept)
    interpreter = re.split(rb"[ \t\n]", head[2:].lstrip(b" \t"), maxsplit=1)[0]
    return interpreter.decode(errors="replace")


def _not_executable(found: str) -> str:
    return f"{shown(found)} is not executable (chmod +x it)"


_BOM_SHEBANG = codecs.BOM_UTF8 + b"#!"
_BOM_REASON = (
    "its #! line comes after a UTF-8 byte-order mark (a Windows editor's), so the "
    "kernel finds none: save it without the mark"
)


_FOREIGN = "it is a binary for another machine or system (exec format error)"
#: the e_machine values of one family, of its 32-bit and its 64-bit binaries, which a 64-bit
#: kernel may run alike (x86_64's i386, aarch64's arm, ppc64's ppc, sparcv9's sparc): one of
#: them refused is not surely refused for its machine
_FAMILIES = (frozenset({3, 62}), frozenset({40, 183}), frozenset({20, 21}), frozenset({2, 18, 43}))


def _machines(head: bytes) -> frozenset[int]:
    """The e_machine of the ELF file whose :func:`_head` is ``head`` (none where it is no ELF
    file), at one offset in a 32-bit and a 64-bit header alike: read in the byte order its
    EI_DATA names, and in this host's, as the kernel reads it (a native binary whose EI_DATA
    says otherwise runs)."""
    if len(head) < 20 or not head.startswith(b"\x7fELF"):
        return frozenset()
    named = {1: "little", 2: "big"}.get(head[5], sys.byteorder)
    return frozenset(int.from_bytes(head[18:20], order) for order in (named, sys.byteorder))


@functools.cache
def _host_own() -> frozenset[int]:
    """The e_machine of this host's own Python's binary (read from ``/proc/self/exe``, else
    ``sys.executable``); none where neither is an ELF file (not Linux)."""
    for exe in ("/proc/self/exe", sys.executable):
        if own := _machines(_head(exe)):
            return own
    return frozenset()


def _host_machines() -> frozenset[int]:
    """The e_machine values this host's kernel runs: its own (:func:`_host_own`) and its
    family's (:data:`_FAMILIES`); none off Linux: then no binary is said to be another's."""
    own = _host_own()
    return own.union(*(family for family in _FAMILIES if own & family))


def _foreign(head: bytes) -> bool:
    """Whether ``head`` is the start of an ELF binary for a machine this host's kernel does
    not run (:func:`_machines`, :func:`_host_machines`)."""
    machines, host = _machines(head), _host_machines()
    return bool(machines and host) and not machines & host


_NO_SHEBANG = (
    "it has no #! line naming its interpreter: make its first line '#!/bin/sh' (or another)"
)
#: the levels of ``#!`` interpreters the kernel follows (past them its own error says so)
_LEVELS = 4


def _unrunnable(interpreter: str) -> str | None:
    """Why the kernel cannot run ``interpreter``, named by a ``#!`` line, whatever is in it:
    it does not exist (the script's "No such file or directory"), or is a folder or has no
    execute bit (its "Permission denied"); None where it is a file the kernel may run. A
    relative one (``#!venv/bin/python3``) is judged against this process's working directory,
    as the kernel resolves it against the starting process's: the children's, as the launcher
    gives none another (no ``cwd``, no ``-wdir``); a caller that did must judge it there."""
    if not os.path.exists(interpreter):
        return "does not exist"
    if os.path.isdir(interpreter):
        return "is a folder, not a program"
    if not os.access(interpreter, os.X_OK):
        return "is not executable (chmod +x it)"
    return None


def _refused(
    head: bytes,
    read: dict[str, bytes],
    last: Callable[[bytes], str | None],
    depth: int = 0,
) -> str | None:
    """Why the kernel refuses a file whose :func:`_head` is ``head``, by its ``#!``
    line: one behind a byte-order mark, or one naming an interpreter :func:`_unrunnable`
    says why of, or one the kernel refuses so itself (followed as deep as its
    :data:`_LEVELS`); ``last`` says why of the first line of the file that names no
    interpreter (its format), if it is a reason. ``read``: the heads already read, by
    path, filled in: each file is read once, so no two answers are of two versions of one.
    None where nothing is found, or an interpreter cannot be read (an execute-only binary,
    left to the kernel). The one judge of ``#!`` lines: of a child's start
    (:func:`not_started`) and of one before it (:func:`start_problem`,
    :func:`exec_failure`)."""
    if head.startswith(_BOM_SHEBANG):
        return _BOM_REASON
    interpreter = _interpreter(head)
    if interpreter is None:
        return last(head)
    if depth >= _LEVELS:
        return None
    named = f"the interpreter its #! line names, {shown(interpreter)}"
    why = _unrunnable(interpreter)
    if why is not None:
        return f"{named}, {why}"
    if not os.access(interpreter, os.R_OK):
        return None
    if interpreter not in read:
        read[interpreter] = _head(interpreter)
    why = _refused(read[interpreter], read, last, depth + 1)
    return None if why is None else f"{named}, cannot be run: {why}"


#: an ELF file the kernel refuses whose e_machine is not another machine's (or unread)
_UNLOADABLE = (
    "it is an ELF file the kernel cannot run: truncated, damaged or not an executable "
    "(exec format error)"
)
#: an ELF file the kernel refuses whose e_machine is its family's other width (_FAMILIES)
_SIBLING = (
    "it is a {bits}-bit binary of this machine's family, which this kernel does not run "
    "(built without {bits}-bit support?), or one truncated or damaged (exec format error)"
)


def _format_unknown(head: bytes) -> str:
    """Why the kernel knows no format (``ENOEXEC``) of a file whose :func:`_head` is
    ``head`` and that names no interpreter: a binary for another machine (its e_machine,
    :func:`_foreign`, as :func:`binary_refused` reads it), one of this machine's other width
    (its family's: a kernel without 32-bit support refuses an i386 binary; a cut one alike),
    another ELF file (a native binary cut short: the kernel refuses it alike), or text."""
    if _foreign(head):
        return _FOREIGN
    bits = {1: 32, 2: 64}.get(head[4]) if len(head) > 4 else None
    if bits and _machines(head) & _host_machines() and not _machines(head) & _host_own():
        return _SIBLING.format(bits=bits)  # i386 on x86_64 without its 32-bit support
    return _UNLOADABLE if head.startswith(b"\x7fELF") else _NO_SHEBANG


def _as_shell_code(head: bytes) -> str | None:
    """:func:`exec_failure`'s :func:`_format_unknown` of a text file only
    (:func:`_runs_as_shell_code`): a binary is left to the kernel (``binfmt_misc``)."""
    return _NO_SHEBANG if _runs_as_shell_code(head) else None


def _any_format(head: bytes) -> None:
    """:func:`start_problem`'s judgement of a file's format: none (``execvp`` runs a script
    without a ``#!`` line with ``/bin/sh``)."""
    return None


def not_started(program: str, exc: OSError, path: str | None = None) -> str:
    """Why ``program`` (a child's first word, looked up on ``path`` as exec does) did not
    start: the kernel's "no such file" for a file that is there is about its ``#!``
    interpreter (a script saved with Windows line ends names ``'/bin/sh\\r'``, or the
    interpreter's own) or its loader, "permission denied" for a file without its execute bit
    or whose interpreter is a folder or has none, and "exec format error" for a script without
    a ``#!`` line (or one behind a byte-order mark)."""
    found = _located(program, path)
    if found is None:
        return describe_os_error(exc)
    if isinstance(exc, PermissionError) and not os.access(found, os.X_OK):
        return _not_executable(found)
    if exc.errno not in (errno.ENOEXEC, errno.ENOENT, errno.EACCES):
        return describe_os_error(exc)
    head = _head(found)
    last = _format_unknown if exc.errno == errno.ENOEXEC else _any_format
    why = _refused(head, {found: head}, last)
    if why is not None:
        return why
    if isinstance(exc, FileNotFoundError):
        return "the file is there, but its program loader (another machine's binary?) is missing"
    return describe_os_error(exc)


def binary_refused(
    program: str, path: str | None = None, read: Mapping[str, bytes] | None = None
) -> str | None:
    """Why the kernel refused ``program`` (looked up on ``path`` as exec does), a binary (ELF)
    for a machine this host's kernel does not run (its e_machine: :func:`_foreign`), where the
    shell that ran it says only its own line (its status 126, ``exec: …: Exec format
    error``): the reason :func:`not_started` gives of the kernel's ``ENOEXEC``. None where it
    is no such file here, or this process cannot read it: the shell's status 126 is of any
    error but a missing file, and its line is then the true one (a native ``mpiexec`` still
    open for writing: "Text file busy"). ``read``: what :func:`exec_failure` read, by path,
    not read again."""
    found = _located(program, path)
    if found is None:
        return None
    return _FOREIGN if _foreign(read[found] if read and found in read else _head(found)) else None


def start_problem(program: str, path: str | None = None) -> str | None:
    """Why ``program`` (looked up on ``path`` as exec does) would not start on this host: a
    file without its execute bit, a ``#!`` line naming an interpreter that does not exist, is
    a folder or has no execute bit (or is refused so itself), or one behind a byte-order mark
    (``execvp`` runs the file with ``/bin/sh``, which reads a Python script as shell:
    ``import: not found``); None where it would start, or is no file here (then the
    starter's own error says so)."""
    found = _located(program, path)
    return None if found is None else _start_problem(found, _head(found))


def _start_problem(found: str, head: bytes) -> str | None:
    """:func:`start_problem` of the file ``found``, whose :func:`_head` is ``head``."""
    if not os.access(found, os.X_OK):
        return _not_executable(found)
    return _refused(head, {found: head}, _any_format)


def _runs_as_shell_code(head: bytes) -> bool:
    """Whether a file whose :func:`_head` (or first line) is ``head`` is text without a
    ``#!`` line (or empty): the kernel knows no format for it (``ENOEXEC``), and a shell's
    ``exec`` or ``execvp`` runs it as shell code instead. A binary (ELF, or a first line not
    text: a format ``binfmt_misc`` may run) is left to the kernel."""
    line = head.split(b"\n", 1)[0]
    return not line.startswith((b"#!", b"\x7fELF")) and b"\0" not in line


def exec_failure(
    program: str, path: str | None = None, read: dict[str, bytes] | None = None
) -> str | None:
    """Why the kernel would refuse to start ``program`` (looked up on ``path`` as exec does):
    :func:`start_problem`'s reasons, and a file it knows no format of (``ENOEXEC``, "exec
    format error": no ``#!`` line, or one naming an interpreter without one), which a child
    started through ``/bin/sh`` (:func:`launcher.process_group.watched`) cannot tell: the
    shell's ``exec`` runs such a file as shell code, and its output was read as the program's
    (``mpiexec --version``). None where it would start, or is no file here; a file this
    process cannot read (an execute-only binary) is left to the kernel. ``read``: what was
    read of each file, by path, filled in, for a later question of the same call
    (:func:`binary_refused` of a start that failed after all) to answer of what was judged."""
    found = _located(program, path)
    if found is None:
        return None
    read = {} if read is None else read
    if found not in read:  # read once: every answer is of one version of the file
        read[found] = _head(found)
    if not os.access(found, os.X_OK):
        return _not_executable(found)
    if not os.access(found, os.R_OK):  # an execute-only binary runs unread: the kernel's
        return None
    return _refused(read[found], read, _as_shell_code)


def is_program_file(found: str) -> bool:
    """Whether the file ``found`` is a program wherever it runs: executable here, or a script
    (``#!``) or binary whose copy on another host may have its execute bit; not a data file
    (``set.npz``), which no host runs. (Of a word after ``--`` rather than a file,
    :func:`launcher.train_words.reads_as_program` asks whether it names a program.)"""
    head = _head(found)
    return os.access(found, os.X_OK) or head.startswith((b"#!", _BOM_SHEBANG, b"\x7fELF"))


def program_problem(program: Program) -> str | None:
    """Why a user's ``program`` (what follows ``--``) would not start on this host
    (:func:`start_problem` of its first word); None for ``distconv train`` arguments or a
    ``.py`` file, which this Python runs, and for a program that would start."""
    if program.is_train or program.is_script:
        return None
    return start_problem(program.argv[0])


#: the interpreter a script without a ``#!`` line is named to run with, by its name's ending
#: (a link's target's: ``run`` -> ``steps.sh`` is a shell script; ``.py``: a link not so named)
_BY_SUFFIX = {
    **{".sh": "sh", ".bash": "bash", ".zsh": "zsh", ".pl": "perl", ".rb": "ruby"},
    ".py": "python3",
}


def local_problem(program: Program) -> str | None:
    """Why a user's ``program`` would not start as a local worker: :func:`program_problem`,
    and a script with no ``#!`` line, which the kernel refuses (``exec format error``) and
    Python's ``subprocess`` runs with no shell in its place, unlike ``execvp`` (mpi's ranks).
    Said at worker 0's start, that came after the shards, the keys and the run directory,
    other workers started first; here it is said before anything starts, with how to run it
    (its interpreter first after ``--``). A binary (ELF, or anything not text: a format
    ``binfmt_misc`` may run) is left to the kernel."""
    problem = program_problem(program)
    if problem is not None or program.is_train or program.is_script:
        return problem
    found = _located(program.argv[0], None)
    if found is None:
        return None
    try:
        with open(found, "rb") as file:
            first = file.readline(256)
    except OSError:  # an execute-only binary (mode 0111) runs, unread: left to the kernel
        return None
    if not _runs_as_shell_code(first):
        return None
    interpreter = _BY_SUFFIX.get(os.path.splitext(os.path.realpath(found))[1])  # its target's
    ways = [interpreter] if interpreter else ["python3", "sh"]
    runs = " or ".join(f"-- {shell_words([way, *program.argv])}" for way in ways)
    return (
        "it has no #! line naming its interpreter: name the interpreter first after --, "
        f"{runs}, or make its first line '#!/bin/sh' (or another)"
    )


def shell_words(argv: Sequence[str]) -> str:
    """``argv`` as shell words on one line (a line break in one as the ``$'...'`` word)."""
    return " ".join(shell_word(w) for w in argv)
