"""Whether a job's key files are private enough to use, as ssh asks of its own.

A secret key readable by others lets them act as a worker (or the shards); a key folder
writable by group or others lets them put their own ``worker-R.key`` there, which a shard then
admits as rank R. A shard or worker refuses such keys with the file and the command that fixes
it (``chmod 600 FILE``, ``chmod 700 DIR``).

Kubernetes mounts a Secret read-only, its files ``0440`` (``defaultMode: 288``) for the pod's
``fsGroup`` and its folder ``1777``: nobody can change a file there, and the group is the pod's
own. So on a read-only mount a folder's write bits mean nothing, and a secret file may be read
by its group; everywhere else a secret file is its owner's alone.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: what each kind of file may allow besides its owner: a secret nothing, a public key reading
SECRET_BITS = stat.S_IRWXG | stat.S_IRWXO
PUBLIC_BITS = stat.S_IWGRP | stat.S_IWOTH
#: what a key folder may not allow: anyone but its owner adding or replacing a file
FOLDER_BITS = stat.S_IWGRP | stat.S_IWOTH
#: the way out where the keys are on a read-only mount, where no chmod can change them: a
#: Kubernetes Secret's (whose default mode is 0644), or a bind mount's (``docker -v DIR:/k:ro``)
MOUNT_FIX = (
    "mount them with mode 0440 (a Secret volume's `defaultMode: 288`; a read-only bind mount's "
    "files: chmod 600 where they come from)"
)
#: what is added where the modes look like a file system's that keeps none (FAT, exFAT, SMB
#: without Unix extensions, a Windows drive under WSL: every file 0755 or 0777), where a chmod
#: changes nothing and the keys are refused again
NO_MODES = (
    " (where chmod changes nothing, as on a FAT or SMB mount or a Windows drive, whose files "
    "all show 0755 or 0777: copy the keys to a file system that keeps modes)"
)


def key_mode_problem(directory: Path, secret: Path, public: list[Path]) -> str | None:
    """Why the keys in ``directory`` cannot be used (a ``secret`` file others could read, the
    folder or a ``public`` file others could change), naming the file or folder, its mode and
    the ``chmod`` that fixes it; None where they are private enough."""
    read_only = _read_only(directory)
    if not read_only and (problem := folder_mode_problem(directory)):
        return problem
    allowed_read = stat.S_IRGRP if read_only else 0  # a Secret's fsGroup, mounted read-only
    checks = [(secret, SECRET_BITS & ~allowed_read, "600")]
    checks += [(file, PUBLIC_BITS, "644") for file in public]
    for file, forbidden, fix in checks:
        mode = stat.S_IMODE(file.stat().st_mode)  # a Secret's files are links: what they name
        if mode & forbidden:
            # no chmod on a read-only mount: its mode is the volume's (a Secret's defaultMode)
            way_out = MOUNT_FIX if read_only else _chmod(fix, file, mode & 0o111 != 0)
            return f"key file {file} is open to group or others (mode {mode:04o}); {way_out}"
    return None


def folder_mode_problem(directory: Path) -> str | None:
    """Why ``directory`` may not hold keys: writable by group or others, who could put a key
    of theirs there; None where only its owner can change it."""
    mode = stat.S_IMODE(directory.stat().st_mode)
    if mode & FOLDER_BITS:
        return (
            f"key folder {directory} is writable by group or others (mode {mode:04o}): another "
            f"user could put a key of theirs there; {_chmod('700', directory, mode == 0o777)}"
        )
    return None


def _chmod(mode: str, path: Path, no_modes: bool) -> str:
    """The way out: ``chmod mode path``, and where its modes look like those of a file system
    that keeps none (``no_modes``: a key file executable, a folder open to all), what to do
    there instead."""
    return f"run `chmod {mode} {path}`{NO_MODES if no_modes else ''}"


def _read_only(directory: Path) -> bool:
    """Whether ``directory`` is on a read-only mount (a Kubernetes Secret volume)."""
    return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
