"""CURVE key files for a parameter-server job, and the ZAP authenticator that checks them.

``distconv keys DIR --workers N`` writes, with pyzmq's own certificate format:

- ``DIR/server.key`` and ``DIR/server.key_secret``: the pair every shard uses;
- ``DIR/worker-R.key`` and ``DIR/worker-R.key_secret`` for each rank R in ``0..N-1``.

A shard reads its secret file and the workers' public files; worker R reads its own secret file
and the server's public file. The directory is ``0700`` and every file is created under
umask ``077`` (secret files ``0600``). Keys travel as files (a mounted
Secret in Kubernetes), never in environment variables, which ``/proc`` shows.

A shard accepts exactly the job's worker keys (a ZAP callback over pyzmq's
:class:`~zmq.auth.thread.ThreadAuthenticator`), and a message that says rank R must come from
worker R's key.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import struct
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85

from distconv.files import fsync_directory
from distconv.sync.ps.config import check_workers

SERVER = "server"
_WORKER = re.compile(r"worker-(\d+)\.key$")


class KeyFileError(ValueError):
    """A key file is missing or unreadable; the text names the file."""


def worker_name(rank: int) -> str:
    return f"worker-{rank}"


def make_keys(directory: str | os.PathLike, workers: int) -> list[Path]:
    """Write the server pair and one pair per worker into ``directory``; returns the files.

    All or none: the set is written whole into a hidden folder first, so that a write that
    fails (a full disk) leaves no key file in ``directory`` for a launch to take as the job's.
    A ``directory`` not there yet is that folder renamed into place (atomic); one there
    already (made by hand, a mount point) is kept, with its owner and mode, and the files
    staged inside it are renamed into it, those moved removed again where a move fails.

    Raises:
        ValueError: ``workers`` outside 1..``MAX_WORKERS`` (:mod:`.config`), or the
            directory already holds keys (never overwritten: a running job would lose its
            credentials).
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
            return _write_into(path, names)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return _write_new(path, names)
    finally:
        os.umask(previous)


def _refuse_held_keys(path: Path) -> None:
    """Raise the ValueError :func:`make_keys` refuses a folder holding keys with."""
    if (path / f"{SERVER}.key").exists():
        raise ValueError(f"{path} already holds keys; remove them or choose another directory")


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
    """Write the set for ``names`` into a hidden folder in ``path``, then rename each file into
    ``path``: renames need no room for data, and those done are undone where one fails. The
    folder is kept as it is (made by an operator with an owner and mode of its own, or a mount
    point, which no rename can replace)."""
    stage = _make_stage(path, ".keys.", path)
    moved: list[Path] = []
    try:
        for file in _write_set(stage, names, path):
            target = path / file.name
            try:
                os.rename(file, target)
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
            # pyzmq writes the public file whole, then the secret one: the last there failed
            failed = pair[1] if pair[1].exists() else pair[0]
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
    ``workers`` workers, as a phrase ("holds keys for 3 worker(s), not 2"); None when they are
    exactly that set, so a job launched again into its run directory can reuse them."""
    path = Path(directory)
    ranks = sorted(
        int(m.group(1)) for f in path.glob("worker-*.key") if (m := _WORKER.search(f.name))
    )
    if ranks != list(range(workers)):
        held = f"{worker_name(ranks[0])}..{worker_name(ranks[-1])}" if ranks else "none"
        return f"holds keys for {len(ranks)} worker(s) ({held}), not {workers}"
    wanted = [SERVER, *(worker_name(r) for r in range(workers))]
    for name in (f"{n}.key{end}" for n in wanted for end in ("", "_secret")):
        if not (path / name).is_file():
            return f"lacks {name} (an interrupted `distconv keys`?)"
    return None


def _load(path: Path, secret: bool) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise KeyFileError(f"CURVE key file {path} not found (make keys with `distconv keys`)")
    try:
        public, private = zmq.auth.load_certificate(str(path))
    except (ValueError, OSError) as exc:
        raise KeyFileError(f"CURVE key file {path} is unreadable: {exc}") from None
    if secret and private is None:
        raise KeyFileError(f"{path} holds no secret key")
    for kind, key in (("public", public), ("secret", private)):
        if key is not None and not _is_curve_key(key):
            # ZeroMQ refused it only as the socket took it, a bare "ZMQError: Invalid
            # argument" traceback (a secret), or a shard admitted no worker (a public key)
            raise KeyFileError(
                f"CURVE key file {path}: its {kind} key is not a CURVE key (40 Z85 characters; "
                "a file edited or cut short? make keys with `distconv keys`)"
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
    workers = {}
    for file in sorted(path.glob("worker-*.key")):
        match = _WORKER.search(file.name)
        if match:
            workers[_load(file, secret=False)[0]] = int(match.group(1))
    if not workers:
        raise KeyFileError(f"no worker-R.key files in {path}")
    return public, secret, workers  # type: ignore[return-value]


def worker_keys(directory: str | os.PathLike, rank: int) -> tuple[bytes, bytes, bytes]:
    """Worker ``rank``'s (public, secret) pair and the servers' public key."""
    path = Path(directory)
    public, secret = _load(path / f"{worker_name(rank)}.key_secret", secret=True)
    server_public, _ = _load(path / f"{SERVER}.key", secret=False)
    return public, secret, server_public  # type: ignore[return-value]


class _JobKeys:
    """ZAP credentials provider: accepts exactly the given client public keys (z85)."""

    def __init__(self, keys: set[bytes]) -> None:
        self.keys = keys

    def callback(self, domain: str, key: bytes) -> bool:
        return key in self.keys


def start_authenticator(context: zmq.Context, worker_public: set[bytes]) -> ThreadAuthenticator:
    """Start pyzmq's ZAP handler on ``context``, admitting only ``worker_public`` keys."""
    auth = ThreadAuthenticator(context)
    auth.start()
    auth.configure_curve_callback(domain="*", credentials_provider=_JobKeys(set(worker_public)))
    return auth


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
