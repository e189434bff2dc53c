"""A folder this process made, known by its device and inode (:class:`MadeFolder`): what an
undo removes is that folder, not another one made again at its path. Kept apart from
:mod:`distconv.files`, which re-exports it."""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(eq=False)
class MadeFolder:
    """A folder this process made, known by its device and inode: what it removes when it
    undoes its work (a shard that cannot start) is that folder, not another one at the same
    path. A user may delete it meanwhile and another shard make it again, empty, for its own
    parts; an ``rmdir`` by path alone removed that one.

    It holds the folder open until :meth:`remove` or :meth:`release`: a folder deleted while
    open keeps its inode, so one made again cannot get the same number. Closed, ext4 hands
    the freed number to the next folder made, and the one made again passed as this one.

    Attributes:
        path: where it was made.
        device: its ``st_dev`` when made.
        inode: its ``st_ino`` when made.
    """

    path: Path
    device: int
    inode: int
    _fd: int | None = field(default=None, repr=False)

    @classmethod
    def make(cls, path: Path) -> MadeFolder:
        """``mkdir path``, remembered by what it made, and held open; call :meth:`remove`
        or :meth:`release`.

        Opened as a path only (``O_PATH``): no read permission needed (a umask of 0477). One
        that cannot be opened (``EMFILE``) is removed again, empty: the caller never got it.

        Raises:
            OSError: as ``mkdir`` (``FileExistsError`` where something is there already), or
                the folder made is gone, or no folder, when opened.
        """
        path.mkdir()
        flags = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW
        try:
            fd = os.open(path, flags | os.O_CLOEXEC)
        except OSError:
            with contextlib.suppress(OSError):  # gone, or a link or a file now: not ours
                os.rmdir(path)
            raise
        made = os.fstat(fd)
        return cls(path, made.st_dev, made.st_ino, fd)

    def remove(self) -> bool:
        """Remove the folder while it is the one made and empty; returns whether it did. One
        of another device or inode at the path (made again by another process), one that is
        not empty, or none at all, is left: it is not this process's to undo. Released after
        (an undo is done once: a second call removes nothing)."""
        if self._fd is None:
            return False
        try:
            now = os.lstat(self.path)
            if not self._is(now):
                return False
            os.rmdir(self.path)
        except OSError:
            return False
        finally:
            self.release()
        return True

    def release(self) -> None:
        """Close the folder, leaving it: the work it was made for is done (or undone)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _is(self, now: os.stat_result) -> bool:
        """Whether ``now`` (an lstat of the path) is the folder made."""
        return stat.S_ISDIR(now.st_mode) and (now.st_dev, now.st_ino) == (self.device, self.inode)
