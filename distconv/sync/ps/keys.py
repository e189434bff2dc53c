"""CURVE key files for a parameter-server job, and the ZAP authenticator that checks them.

``distconv keys DIR --workers N`` writes, with pyzmq's own certificate format:

- ``DIR/server.key`` and ``DIR/server.key_secret``: the pair every shard uses;
- ``DIR/worker-R.key`` and ``DIR/worker-R.key_secret`` for each rank R in ``0..N-1``.

A shard reads its secret file and the workers' public files; worker R reads its own secret file
and the server's public file. A new directory is ``0700``, one there already that group or
others can write is refused, and every file is created under umask ``077`` (secret files
``0600``); keys others could read or replace are refused on load (:mod:`.key_modes`). Keys
travel as files (a mounted Secret in Kubernetes), never in environment variables, which
``/proc`` shows.

A shard accepts exactly the job's worker keys (:mod:`.zap`, a ZAP callback over pyzmq's
:class:`~zmq.auth.thread.ThreadAuthenticator`), and a message that says rank R must come from
worker R's key.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import struct
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from zmq.utils import z85

from distconv.files import describe_os_error, fsync_directory
from distconv.sync.ps.config import check_workers
from distconv.sync.ps.key_modes import folder_mode_problem, key_mode_problem
from distconv.sync.ps.key_names import SERVER, WORKER_PUBLIC, holds_keys, key_files, worker_name
from distconv.sync.ps.zap import start_authenticator as start_authenticator  # (benchmarks)

#: what a launch, or ``distconv keys`` run again, guesses of a key set cut short or damaged
INTERRUPTED = "(an interrupted `distconv keys`?)"
#: where a missing or damaged key file comes from: keys made anew on one host are a set the
#: shards and the other workers do not know
KEY_SET = "the job's key set (made once with `distconv keys`)"


class KeyFileError(ValueError):
    """A key file is missing or unreadable; the text names the file.

    Attributes:
        why: what is wrong with the file, without its name (``holds no secret key``).
        damaged: its contents are wrong (cut short, edited), not its reading (a permission).
    """

    def __init__(self, message: str, why: str = "", damaged: bool = False) -> None:
        super().__init__(message)
        self.why = why or message
        self.damaged = damaged


def make_keys(directory: str | os.PathLike, workers: int) -> list[Path]:
    """Write the server pair and one pair per worker into ``directory``; returns the files.

    All or none: the set is written whole into a hidden folder first, so that a write that
    fails (a full disk) leaves no key file in ``directory`` for a launch to take as the job's.
    A ``directory`` not there yet is that folder renamed into place (atomic); one there
    already (made by hand, a mount point) is kept, with its owner and mode (refused where group
    or others can write it: not changed, as a folder of someone's choice), and the files
    staged inside it are linked into it, never over a file there (a second ``distconv keys``
    meanwhile), the server's pair last (a kill among them leaves a set that lacks it, never
    one that passes for whole), those moved removed again where a move fails.

    Raises:
        ValueError: ``workers`` outside 1..``MAX_WORKERS`` (:mod:`.config`), or the
            directory already holds key files (never overwritten: a running job would lose
            its credentials), said damaged where they are (:func:`key_set_damage`).
        OSError: a folder or file could not be written, naming the key file or folder in
            ``directory`` (its ``filename``) where nothing of the set is left.
    """
    check_workers(workers)
    path = Path(directory)
    names = [SERVER, *(worker_name(r) for r in range(workers))]
    # umask 077 while creating: no file or directory is ever readable by others, not even for
    # the moment between pyzmq writing a secret file and a chmod
    previous = os.umask(0o077)
    try:
        if path.is_dir():
            _refuse_held_keys(path)
            if problem := folder_mode_problem(path):  # not chmod: a folder of someone's choice
                raise ValueError(problem)
        else:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            return _write_into(path, names) if path.is_dir() else _write_new(path, names)
        except OSError as exc:  # another run's keys put there meanwhile: refused, kept as they are
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY) and holds_keys(path):
                raise ValueError(
                    f"{path} already holds keys (put there while this run wrote its own); remove "
                    "them or choose another directory"
                ) from None
            raise
    finally:
        os.umask(previous)


def _refuse_held_keys(path: Path) -> None:
    """Raise the ValueError :func:`make_keys` refuses a folder holding key files with: a
    whole set, or one :func:`key_set_damage` names (a set cut short, run again, was said to
    be keys held as if whole)."""
    if not holds_keys(path):
        return
    held = key_set_damage(path) or "already holds keys"
    raise ValueError(f"{path} {held}; remove them or choose another directory")


def _write_new(path: Path, names: list[str]) -> list[Path]:
    """Write the set for ``names`` into a hidden folder beside ``path`` and rename it to
    ``path`` (not there: an empty folder made there meanwhile is replaced, one with files in
    it is not). The hidden folder is removed on any error."""
    stage = _make_stage(path.parent, f".{path.name}.", path)
    try:
        files = _write_set(stage, names, path)
        try:
            os.rename(stage, path)
        except OSError as exc:
            raise _naming(exc, path) from None
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    fsync_directory(path.parent)  # the rename itself survives a crash
    return [path / file.name for file in files]


def _write_into(path: Path, names: list[str]) -> list[Path]:
    """Write the set for ``names`` into a hidden folder in ``path``, then put each file into
    ``path`` (:func:`_place`): that needs no room for data, and those done are undone where one
    fails. The folder is kept as it is (made by an operator with an owner and mode of its own,
    or a mount point, which no rename can replace). The server's pair goes last: a kill among
    the moves leaves no pair of it, so what is left is a set :func:`key_set_damage` refuses,
    not a smaller one whole in itself (the server's pair and worker 0's, say)."""
    stage = _make_stage(path, ".keys.", path)
    moved: list[Path] = []
    try:
        files = _write_set(stage, names, path)
        server = [file for file in files if file.stem == SERVER]
        for file in [file for file in files if file.stem != SERVER] + server:
            target = path / file.name
            try:
                _place(file, target)
            except OSError as exc:
                raise _naming(exc, target) from None
            moved.append(target)
    except BaseException:
        for target in moved:
            with contextlib.suppress(OSError):  # best effort: the first error is the one said
                target.unlink()
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    fsync_directory(path)
    return moved


#: ``link`` errors of a file system without hard links, where a rename puts the file instead
_NO_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS)


def _place(file: Path, target: Path) -> None:
    """Put the staged ``file`` at ``target``, never over a file there (``FileExistsError``): a
    second ``distconv keys`` into the folder meanwhile found no keys at its start, as this one
    did, and a rename replaced its files, both saying they wrote their keys. A hard link fails
    where ``target`` is there, in one step; without hard links, a rename after a look."""
    try:
        os.link(file, target)
        return
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    os.rename(file, target)


def _make_stage(parent: Path, prefix: str, said: Path) -> Path:
    """A new hidden folder ``<prefix><random>.tmp`` in ``parent`` (mode 0700 under the umask);
    an error names ``said``, the folder the user asked for."""
    while True:
        stage = parent / f"{prefix}{secrets.token_hex(6)}.tmp"
        try:
            stage.mkdir(mode=0o700)
            return stage
        except FileExistsError:  # 48 random bits taken: draw again
            continue
        except OSError as exc:  # a read-only or full disk: said of the folder asked for
            raise _naming(exc, said) from None


def _write_set(stage: Path, names: list[str], target: Path) -> list[Path]:
    """Each of ``names``' pair of certificate files, written into ``stage`` and synced to disk;
    an error names the file as it would be in ``target``."""
    written = []
    for name in names:
        pair = [stage / f"{name}.key", stage / f"{name}.key_secret"]
        try:
            zmq.auth.create_certificates(str(stage), name)
        except OSError as exc:
            # the file that could not be made (a disk out of inodes) is named by open; one
            # made whose bytes failed is the last of the pair there (the public file first)
            failed = Path(exc.filename or (pair[1] if pair[1].exists() else pair[0]))
            raise _naming(exc, target / failed.name) from None
        for file in pair:
            try:
                if file is pair[1]:
                    os.chmod(file, 0o600)
                _sync_file(file)
            except OSError as exc:
                raise _naming(exc, target / file.name) from None
        written += pair
    return written


def _sync_file(file: Path) -> None:
    """Flush ``file`` to disk: its rename into place must not outlive its data in a crash."""
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _naming(exc: OSError, path: Path) -> OSError:
    """``exc`` naming ``path`` (the file or folder the user asked for, not the hidden one it
    was written as); kept as it is where it has no errno."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror, str(path))


def key_set_mismatch(directory: str | os.PathLike, workers: int) -> str | None:
    """How the keys in ``directory`` differ from the set :func:`make_keys` writes for
    ``workers`` workers, as a phrase ("holds keys for 3 worker(s), not 2"), a damaged set
    first (:func:`key_set_damage`); None when they are exactly that set, each file whole, so
    a job launched again into its run directory can reuse them."""
    path = Path(directory)
    damage = key_set_damage(path)
    if damage is not None:
        return damage
    ranks = sorted(
        int(m.group(1)) for f in path.glob("worker-*.key") if (m := WORKER_PUBLIC.search(f.name))
    )
    if ranks != list(range(workers)):
        held = f"{worker_name(ranks[0])}..{worker_name(ranks[-1])}" if ranks else "none"
        return f"holds keys for {len(ranks)} worker(s) ({held}), not {workers}"
    return None


def key_set_damage(directory: str | os.PathLike) -> str | None:
    """Why the key files in ``directory`` are no whole set, for any number of workers, as a
    phrase: a file empty or that does not load ("holds a damaged key set: worker-1.key_secret
    is empty (an interrupted `distconv keys`?)"), or one of a pair missing ("lacks
    server.key_secret ..."); None where each file loads and has its pair, the server's too.
    An empty secret file passed for a key: the job failed at its first worker, in words
    never restarted, and none said to remove the keys."""
    path = Path(directory)
    names = key_files(path)
    for name in names:
        file = path / name
        try:
            if file.stat().st_size == 0:
                return f"holds a damaged key set: {name} is empty {INTERRUPTED}"
            _load(file, secret=name.endswith("_secret"))
        except OSError as exc:  # gone or unreadable since listed
            return f"holds {name}, which cannot be read: {describe_os_error(exc)}"
        except KeyFileError as exc:
            if exc.damaged:
                return f"holds a damaged key set: {name} {exc.why} {INTERRUPTED}"
            return f"holds {name}, which {exc.why}"
    stems = {SERVER} | {name.split(".")[0] for name in names}
    for stem in sorted(stems, key=lambda stem: (stem != SERVER, len(stem), stem)):
        for name in (f"{stem}.key", f"{stem}.key_secret"):
            if name not in names:
                return f"lacks {name} {INTERRUPTED}"
    return None


def _load(path: Path, secret: bool) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        whose = "this rank's " if secret and path.name.startswith("worker-") else ""
        raise KeyFileError(
            f"CURVE key file {path} not found: copy {whose}{path.name} from {KEY_SET}",
            "is missing",
        )
    try:
        public, private = zmq.auth.load_certificate(str(path))
    except ValueError as exc:  # no public key line: cut short, edited
        why = "holds no public key"
        raise KeyFileError(
            f"CURVE key file {path} is unreadable: {exc}", why, damaged=True
        ) from None
    except IndexError:  # pyzmq's reader on a key line without its "=": cut short in it
        why = "holds a key line without its value"
        raise KeyFileError(
            f"CURVE key file {path} is unreadable: a key line without its value (a file edited "
            f"or cut short? copy it again from {KEY_SET})",
            why,
            damaged=True,
        ) from None
    except OSError as exc:
        why = f"cannot be read: {describe_os_error(exc)}"
        raise KeyFileError(f"CURVE key file {path} is unreadable: {exc}", why) from None
    if secret and private is None:
        raise KeyFileError(f"{path} holds no secret key", "holds no secret key", damaged=True)
    for kind, key in (("public", public), ("secret", private)):
        if key is not None and not _is_curve_key(key):
            # ZeroMQ refused it only as the socket took it, a bare "ZMQError: Invalid
            # argument" traceback (a secret), or a shard admitted no worker (a public key)
            raise KeyFileError(
                f"CURVE key file {path}: its {kind} key is not a CURVE key (40 Z85 characters; "
                f"a file edited or cut short? copy it again from {KEY_SET})",
                f"holds a {kind} key that is not a CURVE key",
                damaged=True,
            )
    return public, private


def _is_curve_key(key: bytes) -> bool:
    """Whether ``key`` is a CURVE key as certificate files hold it: 40 Z85 characters that
    decode to 32 bytes (ZeroMQ refuses any other as a socket option)."""
    try:
        return len(key) == 40 and len(z85.decode(key)) == 32
    except (ValueError, KeyError, struct.error):  # a length, a character, a group past 2**32
        return False


def server_keys(directory: str | os.PathLike) -> tuple[bytes, bytes, dict[bytes, int]]:
    """A shard's (public, secret) pair and the job's worker public keys, mapped to their ranks."""
    path = Path(directory)
    public, secret = _load(path / f"{SERVER}.key_secret", secret=True)
    workers, files = {}, []
    for file in sorted(path.glob("worker-*.key")):
        match = WORKER_PUBLIC.search(file.name)
        if match:
            workers[_load(file, secret=False)[0]] = int(match.group(1))
            files.append(file)
    if not workers:
        raise KeyFileError(f"no worker-R.key files in {path}")
    _refuse_open_keys(path, path / f"{SERVER}.key_secret", files)
    return public, secret, workers  # type: ignore[return-value]


def worker_keys(directory: str | os.PathLike, rank: int) -> tuple[bytes, bytes, bytes]:
    """Worker ``rank``'s (public, secret) pair and the servers' public key."""
    path = Path(directory)
    public, secret = _load(path / f"{worker_name(rank)}.key_secret", secret=True)
    server_public, _ = _load(path / f"{SERVER}.key", secret=False)
    _refuse_open_keys(path, path / f"{worker_name(rank)}.key_secret", [path / f"{SERVER}.key"])
    return public, secret, server_public  # type: ignore[return-value]


def _refuse_open_keys(path: Path, secret: Path, public: list[Path]) -> None:
    """KeyFileError where others could read ``secret`` or change ``path`` or ``public``."""
    problem = key_mode_problem(path, secret, public)
    if problem is not None:
        raise KeyFileError(problem)


def curve_server(socket: zmq.Socket, public: bytes, secret: bytes) -> None:
    """Make ``socket`` a CURVE server (before bind)."""
    socket.curve_publickey = public
    socket.curve_secretkey = secret
    socket.curve_server = True


def curve_client(socket: zmq.Socket, keys: tuple[bytes, bytes, bytes]) -> None:
    """Make ``socket`` a CURVE client of the server whose public key is ``keys[2]``."""
    socket.curve_publickey, socket.curve_secretkey, socket.curve_serverkey = keys


def user_id(frame: Any) -> bytes | None:
    """The ZAP user id (the client's z85 public key) of a received frame, if authenticated."""
    try:
        value = frame.get("User-Id")
    except zmq.ZMQError:
        return None
    return value.encode() if isinstance(value, str) else value
