"""``distconv check-manifests PATH...``: :func:`~distconv.deploy.check.manifest_problems` on
manifests written or edited by hand.

Each PATH is a YAML or JSON file (several documents, a ``kind: List``), a folder (its
``*.yaml``, ``*.yml`` and ``*.json``; its subfolders too with ``-r``), or ``-`` for stdin; all of
them together are one job's manifests. Exit 0 with ``no problems`` (nothing with ``-q``); 1 with
one line per problem on stdout, led by where its object is written (``job.yaml:12:``,
:mod:`~distconv.deploy.located`); 2 with one line on stderr for a path that cannot be read, a
document that is no object, no manifests at all, or a result stdout cannot take. A file's text
is read into its documents by :mod:`~distconv.deploy.manifest_documents`.

:func:`distconv.cli.add_check_manifests` declares the command and imports this module only
when it runs: importing it loads every check and PyYAML (its loader is subclassed here), which
``distconv train``, whose parser declares the command too, must not wait for.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import stat
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from distconv.deploy import fifo_readers as fifo
from distconv.deploy.located import Source, located_problems
from distconv.deploy.manifest_documents import (
    _json_documents,
    _looks_json,
    _maybe_json,
    _refuse_shape,
    _yaml_documents,
)
from distconv.deploy.manifest_text import ManifestReadError, manifest_text, unmarked_encoding
from distconv.files import describe_os_error
from distconv.messages import shell_quoted
from distconv.stdout_drop import drop_stdout, write_failure

PROG = "distconv check-manifests"
#: what a folder's files are read by: kubectl apply -f FOLDER reads the same (case matters)
SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"
#: the most bytes read of one input: a job's manifests are a few hundred kB (the API server takes
#: 3 MiB an object), and a device (/dev/zero), a FIFO or stdin may never end
MAX_BYTES = 64 << 20
#: how long a FIFO named as a file is waited on for a writer to open it: a FIFO nothing opens
#: hung a CI step; one a writer has open (``<(helm template ...)``) is read as stdin is
FIFO_WAIT_S = 30.0
#: how often a FIFO is looked at for a writer that has opened it but written nothing yet
_FIFO_LOOK_S = 0.05
#: what may not stand in a line of output as it is (a line break, a tab, an escape)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def run_check_manifests(args: argparse.Namespace) -> int:
    """Check the manifests at ``args.paths``; returns the exit status (0, 1 or 2)."""
    try:
        sources = read_sources(args.paths, recursive=args.recursive)
    except ManifestReadError as exc:  # a file's name may hold a line break: still one line
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    problems = located_problems(sources)
    quiet = getattr(args, "quiet", False)
    lines = "".join(f"{_one_line(problem)}\n" for problem in problems)
    try:
        _write(lines or ("" if quiet else "no problems\n"))
    except (OSError, UnicodeEncodeError) as exc:  # a full disk; a name its encoding lacks
        print(
            f"{PROG}: error: cannot write the result to stdout: {write_failure(exc)}",
            file=sys.stderr,
        )
        return 2  # not 1: that says the manifests have problems, which nobody read
    return 1 if problems else 0


def _one_line(problem: str) -> str:
    """``problem`` on one line: a name the manifest gives, or a file's name, may hold a line
    break (``"a\\nb"``), which would make one problem two lines to ``grep`` or ``wc -l``."""
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], problem)


def read_manifests(paths: Sequence[str], recursive: bool = False) -> list[Any]:
    """The YAML or JSON documents of every file at ``paths`` (``-``: stdin), each file once.

    Raises :class:`ManifestReadError` for a path that cannot be read, a document that is no
    mapping, and where there are no objects at all (kubectl apply refuses each).
    """
    return [doc for _, doc in read_sources(paths, recursive)]


def read_sources(paths: Sequence[str], recursive: bool = False) -> list[Source]:
    """:func:`read_manifests`, each document with where it is: ``FILE:LINE``, the line it
    starts on (``<stdin>:1``)."""
    sources: list[Source] = []
    for name in (names := list(_unique(_files(paths, recursive)))):  # a folder's FIFOs too
        sources.extend(
            (f"{_shown(name)}:{line}", doc) for line, doc in _documents(name, _read(name))
        )
    if not sum(_object_count(doc) for _, doc in sources):
        folders = not recursive and any(p != STDIN and os.path.isdir(p) for p in paths)
        hint = (" (-r reads subfolders too)" if folders else "") + fifo.shared_hint(*names)
        raise ManifestReadError(f"no manifests in {', '.join(map(_shown, paths))}{hint}")
    return sources


def _files(paths: Sequence[str], recursive: bool) -> Iterator[str]:
    """Each file named by ``paths``: a file (or ``-``) as it is, a folder's manifest files in
    sorted order."""
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            yield from _folder_files(path, recursive)
        else:  # a file, of any name, or what does not exist: its read says why
            yield path


def _folder_files(folder: str, recursive: bool) -> list[str]:
    """The manifest files in ``folder`` (and below it when ``recursive``), sorted. A link to a
    folder is not followed: one to a folder above would loop."""

    def refuse(exc: OSError) -> None:
        raise ManifestReadError(f"{_shown(exc.filename)}: {describe_os_error(exc)}") from exc

    found = []
    for top, subfolders, names in os.walk(folder, onerror=refuse):
        found.extend(os.path.join(top, name) for name in names if name.endswith(SUFFIXES))
        if not recursive:
            subfolders.clear()
    return sorted(found)


def _unique(names: Iterator[str]) -> Iterator[str]:
    """``names`` without a file seen before (a folder and a file in it): read twice, each
    object would be named twice."""
    seen = set()
    for name in names:
        key = name if name == STDIN else os.path.realpath(name)
        if key not in seen:
            seen.add(key)
            yield name


def _read(name: str) -> bytes:
    """The bytes of file ``name`` (``-``: stdin), refused past :data:`MAX_BYTES`: a device or
    a FIFO, like a file, is read no further (``/dev/zero`` filled memory)."""
    try:
        if name == STDIN:
            if sys.stdin is None:
                raise OSError(0, "stdin is closed")
            if held := fifo.stream_writers(sys.stdin):  # a writer of our own: never ends
                raise ManifestReadError(f"{_shown(name)}: {held}")
            data = _read_stdin()
        else:
            data = _read_file(name)
    except OSError as exc:
        raise ManifestReadError(f"{_shown(name)}: {describe_os_error(exc)}") from exc
    if len(data) > MAX_BYTES:
        raise ManifestReadError(
            f"{_shown(name)}: more than {MAX_BYTES >> 20} MiB, which no job's manifests need"
        )
    return data


def _read_stdin() -> bytes:
    """The first :data:`MAX_BYTES` + 1 bytes of stdin, however long its writer is silent. A
    stdin left non-blocking (its file description shared with a process that set
    ``O_NONBLOCK``) gave what had come so far, the rest of the manifests unread, or None (a
    traceback): where nothing has come yet it is waited on, as a blocking stdin is."""
    stream, chunks, size = sys.stdin.buffer, [], 0
    while size <= MAX_BYTES:
        try:
            chunk = stream.read(MAX_BYTES + 1 - size)
        except BlockingIOError:  # as BufferedReader may say "nothing yet", or by None
            chunk = None
        if chunk is None:  # only a descriptor is non-blocking: an in-memory stdin has none
            poller = select.poll()  # not select.select: no limit on the descriptor's number
            poller.register(stream, select.POLLIN)
            poller.poll()  # bytes or the writer's close wake it: no busy loop
        elif not chunk:
            break
        else:
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)


def _read_file(name: str) -> bytes:
    """The first :data:`MAX_BYTES` + 1 bytes of file ``name``. Opened without blocking: opening
    a FIFO blocks until something opens it to write, for ever where nothing does. A FIFO (a
    pipe, ``<(kubectl kustomize ...)``) is read once a writer has it open (:func:`_fifo_head`)."""
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as file:  # closes fd, whatever is raised
        head = _fifo_head(fd, name) if stat.S_ISFIFO(os.fstat(fd).st_mode) else b""
        os.set_blocking(fd, True)  # a writer slow after its first bytes is read as stdin is
        return head + file.read(MAX_BYTES + 1 - len(head))


def _fifo_head(fd: int, name: str) -> bytes:
    """The first bytes of FIFO ``fd``; none where a writer came and closed without writing, or
    has it open and writes nothing in :data:`FIFO_WAIT_S` (then read as stdin is, after a note).
    Refused where no writer opens it in :data:`FIFO_WAIT_S`, and at once where this process
    was handed it open to write (:func:`~distconv.deploy.fifo_readers.own_writers`)."""
    deadline = time.monotonic() + FIFO_WAIT_S
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if held := fifo.own_writers(fd):  # a writer that never closes: ours
        raise ManifestReadError(f"{_shown(name)}: {held}")
    while True:
        try:
            head = os.read(fd, 1 << 16)  # what a pipe holds, not a 64 MiB buffer each look
        except BlockingIOError:  # a writer has it open (no writer: an empty read, not this)
            head = None
        if head or (head is not None and poller.poll(0)):  # POLLHUP: a writer came, closed
            return head
        if (left := deadline - time.monotonic()) <= 0:
            if head is None:  # a render may take long: read as stdin is, never refused
                print(f"{PROG}: note: {_shown(name)}: {fifo.SILENT_WRITER}", file=sys.stderr)
                return b""
            raise ManifestReadError(f"{_shown(name)}: {fifo.NO_WRITER.format(FIFO_WAIT_S)}")
        poller.poll(min(left, _FIFO_LOOK_S) * 1000)  # bytes or a close wake it; an open does not


def _documents(name: str, data: bytes) -> list[tuple[int, Any]]:
    """The documents in ``data``, read from ``name`` as kubectl's decoder reads any file: JSON
    where the text starts with ``{`` (``[`` too), else YAML, whatever the name; where a file
    not named ``.json`` fails as JSON, it is read as YAML (``{kind: Job}``). YAML 1.1 reads
    ``1e3`` as a string, JSON (``kubectl get -o json | ...``) a number. Each document must be
    a mapping, or empty; none may hold itself. Each comes with the line it starts on."""
    try:
        text = manifest_text(data)
        if name.endswith(".json") and _looks_json(text):
            docs = _json_documents(text)
        else:  # YAML that only looks like JSON, `{kind: Job}`, is read as YAML
            docs = _maybe_json(text) or _yaml_documents(text)
        for number, (line, doc) in enumerate(docs, 1):
            _refuse_shape(doc, f"document {number} (line {line})")
    except ManifestReadError as exc:  # UTF-16 with no mark: its encoding guessed, before why
        shared = fifo.shared_hint(name)  # cut by a reader elsewhere?
        raise ManifestReadError(f"{_shown(name)}: {unmarked_encoding(data)}{exc}{shared}") from None
    return docs


def _object_count(doc: Any) -> int:
    """How many objects ``doc`` stands for: none for an empty document or an empty List (kubectl
    apply: "no objects passed to apply"), the items of a List, else one."""
    count, pending = 0, [] if doc is None else [doc]  # Lists in Lists: no recursion
    while pending:
        doc = pending.pop()
        items = doc.get("items") if str(doc.get("kind")).endswith("List") else None
        if isinstance(items, list) or (items is None and "items" in doc):
            pending.extend(item for item in items or [] if isinstance(item, dict))
            count += sum(not isinstance(item, dict) for item in items or [])
        else:
            count += 1
    return count


def _shown(path: str) -> str:
    """``path`` as the messages name it: a name with a line break or another character that
    does not print (a byte of no UTF-8) as the shell word ``distconv train``'s errors show,
    ``$'a\\nb.yaml'``, which pastes back as the same path (escaped alone, ``a\\nb.yaml``
    named another)."""
    if path == STDIN:
        return "<stdin>"
    return path if path.isprintable() else shell_quoted(path)


def _write(text: str) -> None:
    """Write ``text`` on stdout; a reader that is gone (``| head -1``) leaves the exit status
    to say the rest, without a traceback at the flush at exit. Raises :class:`OSError` (a
    full disk, stdout closed) or :class:`UnicodeEncodeError` for any other failure, stdout
    dropped so that the flush at exit does not fail again. No text (``-q``): no stdout used."""
    if not text:
        return
    try:
        if sys.stdout is None:  # started with stdout closed
            raise OSError(0, "stdout is closed")
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        drop_stdout()
    except (OSError, UnicodeEncodeError):
        drop_stdout()
        raise
