"""Atomic file replacement, shared by checkpoints and the metrics log (standard library only).

A file written with :func:`write_atomically` holds either its old contents or the new, whole:
the data go to a temporary file in the same directory, are flushed to disk, renamed over the
target (atomic on POSIX) and the directory is synced so the rename itself survives a crash.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import glob
import logging
import os
import secrets
import shutil
import socket
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from distconv.made_folder import MadeFolder as MadeFolder  # its old home: importers kept
from distconv.messages import quoted_in
from distconv.short_lists import short_list

#: called after each chunk is written; tests set it to stop a writer provably mid-save
write_hook: Callable[[Path], None] | None = None


def write_atomically(
    path: str | os.PathLike, chunks: Iterable[bytes], *, mode: int = 0o644
) -> None:
    """Replace ``path`` with the concatenation of ``chunks``, all or nothing.

    Temporary files that a killed writer left (``.<name>.*.tmp``) are removed first: one writer
    per path, so any such file is stale by now and would only fill the disk.

    Args:
        path: the file to replace; its directory must exist.
        chunks: the new contents, written in order.
        mode: permission bits of the new file, less the umask, as ``open`` makes a file.

    Raises:
        OSError: the file could not be written; ``path`` is left as it was and no temporary
            file remains.
    """
    path = Path(path)
    prefix = f".{path.name}."
    for stale in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        stale.unlink(missing_ok=True)
    fd, tmp = _create_temporary(path.parent, prefix, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
                if write_hook is not None:
                    write_hook(path)
            f.flush()
            os.fsync(f.fileno())  # the data must be on disk before the rename makes them live
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise naming(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def write_all_atomically(contents: Mapping[Path, bytes]) -> None:
    """Replace each file of ``contents`` with its bytes: all of them, or none.

    Every file is first written whole beside its target (``.<name>.new``, through
    :func:`write_atomically`), then each renamed over its target, so a write that fails (a
    full disk) leaves every target as it was, not some files of the new set beside others of
    the old. A rename that fails (a folder put where a target goes since the caller looked)
    puts back the targets renamed before it (:func:`_replace_all`).

    Raises:
        OSError: a file could not be written or renamed; every target is left as it was and
            nothing staged remains.
    """
    staged = {path: path.with_name(f".{path.name}.new") for path in contents}
    try:
        for path, new in staged.items():
            write_atomically(new, [contents[path]])
        _replace_all(staged)
    finally:
        for new in staged.values():
            new.unlink(missing_ok=True)
    for directory in {path.parent for path in staged}:
        fsync_directory(directory)


def _replace_all(staged: Mapping[Path, Path]) -> None:
    """Rename each staged file over its target (target -> staged file), each target's old file
    kept meanwhile as ``.<name>.old`` (:func:`_keep_copy`: a hard link or a copy, so that the
    target is never missing where it can be): a rename that fails puts back every target
    renamed before it, old file or none, where the renames stopped half-way left the new files
    renamed so far beside the old ones. A target is put back from its first step on, so that
    an interrupt (Ctrl-C) between a rename and its bookkeeping puts it back too; an old file
    that could not be put back is kept as ``.<name>.old`` where its target is missing."""
    old = {path: path.with_name(f".{path.name}.old") for path in staged}
    existed: dict[Path, bool] = {}  # the targets begun, in order: whether each was there
    try:
        for path, new in staged.items():
            old[path].unlink(missing_ok=True)
            existed[path] = os.path.lexists(path)
            if existed[path]:
                _keep_copy(path, old[path])
            os.replace(new, path)
    except BaseException:
        for path in reversed(existed):  # best effort: the first error is the one to report
            try:
                if os.path.lexists(old[path]):
                    os.replace(old[path], path)
                elif not existed[path]:
                    path.unlink(missing_ok=True)
            except OSError:
                pass
        raise
    finally:
        for path, kept in old.items():
            if os.path.lexists(path):  # else the old file is the only copy of its target
                kept.unlink(missing_ok=True)


def _keep_copy(path: Path, copy: Path) -> None:
    """``copy`` as a second name of ``path`` (a link itself, not its target), or a copy of it
    where the filesystem has no hard links; or else ``path`` itself moved to ``copy``: another
    user's file that this one may not read (mode 600) can be neither linked
    (``fs.protected_hardlinks``) nor copied, yet its folder may let this user replace it, as
    a rename over it did before the old files were kept. A folder is never moved (the error
    is raised: a rename over it fails). A copy cut short is removed: put back, it would stand
    for the whole file."""
    try:
        os.link(path, copy, follow_symlinks=False)
        return
    except OSError:
        pass
    try:
        shutil.copy2(path, copy, follow_symlinks=False)
        return
    except BaseException as exc:
        copy.unlink(missing_ok=True)
        if not isinstance(exc, OSError) or stat.S_ISDIR(os.lstat(path).st_mode):
            raise
    os.replace(path, copy)


def _create_temporary(directory: Path, prefix: str, mode: int) -> tuple[int, Path]:
    """A new file ``<prefix><random>.tmp`` in ``directory``, open for writing.

    Created with ``mode`` for the kernel to apply the umask: ``mkstemp`` makes a private file,
    and a chmod after it made every checkpoint world-readable under a umask of 077.
    """
    while True:
        tmp = directory / f"{prefix}{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), tmp
        except FileExistsError:  # 48 random bits taken: draw again
            continue


def folder(text: str, show: Callable[[str], str] = str) -> str:
    """An argparse type: a folder a command writes into, made where missing. A blank one (an
    unset variable: ``--run-dir "$RUN_DIR"``) named none: the launcher put its default in its
    place without a word, ``distconv keys ""`` wrote the secret keys into the working
    directory; a file there failed later, with ``[Errno 17] File exists``. ``show`` writes
    the paths its refusal names (:func:`folder_problem`)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    problem = folder_problem(text, show)
    if problem is not None:  # argparse prints it as it is: a line break in it quoted here
        raise argparse.ArgumentTypeError(quoted_in(problem, [text]))
    return text


def folder_problem(path: str | os.PathLike, show: Callable[[str], str] = str) -> str | None:
    """Why ``path`` cannot be a folder made with ``mkdir -p``, naming the culprit, or None: it
    or a folder above it is a file, or a symlink to nowhere. ``makedirs`` said ``[Errno 17]
    File exists`` of a dangling link (``runs -> /scratch/runs``, the scratch unmounted), as if
    an existing folder were the trouble. Checked from ``path`` up to the first folder there.

    ``show`` writes each path it names: bare by default; the launcher quotes them
    (:func:`launcher.shown.shown`), as its other lines do, where a bare path with a space in
    it (``run 1/logs is a file``) read as words of the message."""
    for where in (Path(path), *Path(path).parents):
        try:
            mode = os.stat(where).st_mode
        except OSError as exc:
            if not os.path.islink(where):
                continue  # not there yet (mkdir makes it) or out of reach (mkdir names that)
            # only a link whose target is missing is 'not there': one into a folder this user
            # may not search (EACCES) was named as if unmounted; mkdir names that truly
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return None
            return f"{show(str(where))} is a symlink to {show(_link_target(where))}, not there"
        return None if stat.S_ISDIR(mode) else f"{show(str(where))} is a file, not a folder"
    return None


def _link_target(link: Path) -> str:
    """What ``link`` points to, or 'nowhere' when even that cannot be read: a /proc magic link
    (``/proc/1/cwd``) refuses readlink, which escaped argparse as a traceback."""
    try:
        return os.readlink(link)
    except OSError:
        return "nowhere"


class LockTaken(Exception):
    """Another live process holds the lock; the message is who, as it wrote itself."""


def hold_lock(path: str | os.PathLike) -> int:
    """Open ``path`` (created) and hold an exclusive ``flock`` on it, writing who holds it
    (``pid N on HOST``) into it; returns the descriptor, which holds the lock until it is
    closed. The kernel drops the lock when its holder dies, so it is never stale.

    Raises:
        LockTaken: another process holds it.
        OSError: the file cannot be opened or written.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:  # any failure closes the descriptor; ENOLCK (NFS without locking): the caller says
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            raise LockTaken(holder or "another process") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def fsync_directory(directory: str | os.PathLike) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def naming(exc: OSError, path: str | os.PathLike) -> OSError:
    """``exc``, or where it names no file (a write that fills the disk names none) the same
    error naming ``path``, so that the one line a user reads says which file. One with no
    errno (``OSError("message")``, as libraries raise) is kept: rebuilt from its errno and
    strerror, both None, it would read ``[Errno None] None``, its message lost."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror, str(path))


def delete_path(path: Path) -> None:
    """Delete a file, a link or a directory tree (a link itself, never what it points at).

    Raises:
        OSError: naming what could not go by its whole path: ``rmtree`` names a file in the
            tree by its name alone (``chief.safetensors``: of which checkpoint, not said).
    """
    if path.is_dir() and not path.is_symlink():
        try:
            if sys.version_info >= (3, 12):  # pragma: no cover - onerror is deprecated there
                shutil.rmtree(path, onexc=_named_in_full)
            else:
                shutil.rmtree(path, onerror=_named_in_full)
        except _Undeletable as stop:
            raise stop.error from None
    else:
        path.unlink()


class _Undeletable(Exception):
    """What :func:`_named_in_full` raises through ``rmtree``: not an OSError, which Python
    3.13's ``rmtree`` catches around its handler's call and hands the handler again, the
    file's folder put in the place of the file (``step-00000180``, not its part)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def _named_in_full(function: Callable, where: str, error: BaseException | tuple) -> None:
    """An ``rmtree`` error handler: stop it with the error naming ``where``, the whole path
    (an ``onerror`` handler is given the exception as ``sys.exc_info()``, ``onexc`` as
    itself)."""
    exc = error[1] if isinstance(error, tuple) else error
    if isinstance(exc, OSError) and exc.errno is not None:
        exc = OSError(exc.errno, exc.strerror, where)
    raise _Undeletable(exc)


def delete_files(paths: Iterable[Path], log: logging.Logger, message: str) -> list[Path]:
    """Unlink each of ``paths`` (one gone already counts), on past any that cannot go, which
    are one warning: ``message`` with ``%s`` for the first's error. A prune that stopped at the
    first failure, oldest first (another owner's file in a sticky directory, a name taken by a
    directory), kept every newer file for good and never deleted anything again.

    Returns:
        The paths deleted.
    """
    deleted, failed = [], []
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            failed.append(exc)
        else:
            deleted.append(path)
    if failed:
        log.warning(message, short_list(failed, 1, bracketed=True))
    return deleted


def describe_os_error(exc: OSError) -> str:
    """A short, lower-case cause for an OS error: ``no space left on device``."""
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    reason = exc.strerror or (os.strerror(exc.errno) if exc.errno else "") or str(exc)
    return (reason or type(exc).__name__).lower()
