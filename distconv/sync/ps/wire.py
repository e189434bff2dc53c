"""Framing for the parameter server: one msgpack header, then raw array frames.

A message is a ZeroMQ multipart message ``[header, frame_0, ..., frame_k]``. The header is a
msgpack map; its ``"arrays"`` entry describes each following frame as ``[dtype, shape, nbytes]``.
Arrays travel as their raw bytes (C order, little-endian), never inside msgpack and never
pickled: packing arrays inside msgpack copies them, thousands of times slower than sending a
raw frame (docs/benchmarks.md).

Every header is checked before any frame becomes an array: protocol version, operation,
field types, dtype (from a short allow-list), shape, byte counts and the total size. A message
that fails raises :class:`WireError` with a one-line reason; the server answers or drops it and
goes on serving. ``docs/protocol.md`` describes the same rules for other clients.
"""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
import numpy as np
import zmq

from distconv.sync.ps.blocks import ParamSpec
from distconv.sync.ps.header_fields import NEEDED, REQUIRED, TYPES

#: bumped whenever a header field or frame layout changes meaning (2: a push carries several
#: parameters; 3: a reply's dense values travel as one frame; 4: a dense push's gradients may
#: travel as uint8 runs of consecutive blocks; 5: a hello names its job by the description's
#: digest, and carries the description only when it is small; 6: a large description's small
#: entries travel as text, beside its large entries' digests)
PROTOCOL_VERSION = 7
#: dtypes a parameter, so a block, may have (little-endian): those the optimizers update (an
#: int64 parameter was seeded, and every optimizer then failed on it at the first push)
VALUE_DTYPES = {"float32": np.dtype("<f4"), "float64": np.dtype("<f8")}
#: dtypes allowed in array frames: a block's, row ids and step counts (int64), or raw bytes (a
#: reply's values, back to back); nothing else is ever turned into an array
DTYPES = {**VALUE_DTYPES, "int64": np.dtype("<i8"), "uint8": np.dtype("u1")}
#: ``zmq.SNDMORE`` as a plain int (pyzmq's flag enum costs microseconds per operation)
_MORE = int(zmq.SNDMORE)
#: the wire name of each allowed dtype (equal dtypes hash equal: native float32 is "<f4" here)
_WIRE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
#: largest header, in bytes; headers carry ids and small descriptions, never data (a hello
#: carries a large job's description as its digest: job_hello.DESCRIPTION_BUDGET)
MAX_HEADER_BYTES = 1 << 20
#: default cap on one message's array bytes (a shard's ``--max-message-bytes``)
MAX_MESSAGE_BYTES = 1 << 30
#: default bound on one array frame (a shard's ``--max-frame-bytes``): 16 default blocks
MAX_FRAME_BYTES = 16 << 20


def frame_limit(max_message_bytes: int, max_frame_bytes: int) -> int:
    """The largest array frame a shard takes: the frame bound or the message cap, the smaller."""
    return min(max_frame_bytes, max_message_bytes)


#: what CURVE adds to each frame on the wire ("MESSAGE" command, nonce, MAC, flags), which is
#: what ZeroMQ holds against ``MAXMSGSIZE``: a frame within 33 bytes of it was dropped
CURVE_FRAME_OVERHEAD = 33


def zmq_max_msg_size(max_message_bytes: int, max_frame_bytes: int, curve: bool = False) -> int:
    """ZeroMQ's ``MAXMSGSIZE`` for a shard, which ZeroMQ applies to each *frame* as it travels
    (encrypted, with ``curve``): the largest array frame, or a header frame (up to
    ``MAX_HEADER_BYTES``), whichever is larger."""
    limit = max(frame_limit(max_message_bytes, max_frame_bytes), MAX_HEADER_BYTES)
    return min(limit + (CURVE_FRAME_OVERHEAD if curve else 0), MAX_ARRAY_BYTES)  # an int64


#: reprs of received values in errors and logs: a header may hold up to a MiB of anything
_SHORT = reprlib.Repr()  # (keyword arguments need Python 3.12)
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 3, 6, 6
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 40
#: the most bytes any one shape may describe (numpy's own limit on an array's size)
MAX_ARRAY_BYTES = 2**63 - 1


def short(value: Any) -> str:
    """``repr(value)``, cut short: what an error or log line may quote of received input."""
    return _SHORT.repr(value)


class WireError(ValueError):
    """A message does not follow the protocol; the text names what is wrong. ``rid``: the
    ``id`` of the header refused, where it decoded to a map with an int ``id`` (else -1)."""

    rid = -1


def pack(header: Mapping[str, Any], arrays: Sequence[np.ndarray] = ()) -> list[Any]:
    """The frames of one message: ``header`` (plus version and array table), then the arrays.

    The arrays are sent as they are (no copy); they must be C-contiguous with an allowed dtype.
    """
    table = []
    for a in arrays:
        if not a.flags.c_contiguous:
            raise WireError(f"array frames must be C-contiguous, got strides {a.strides}")
        table.append([dtype_name(a.dtype), list(a.shape), int(a.nbytes)])
    head = {**header, "v": PROTOCOL_VERSION, "arrays": table}
    return [msgpack.packb(head, use_bin_type=True), *(_frame(a) for a in arrays)]


def send(
    sock: Any,
    frames: Sequence[Any],
    prefix: Sequence[bytes] = (),
    track: bool = False,
    copy: bool = False,
) -> Any:
    """Send one message: ``prefix`` (a ROUTER's peer identity) and the header copied (they
    are small), the array frames without a copy unless ``copy``. What ``send_multipart``
    does, with plain int flags: pyzmq's flag enum costs microseconds per frame.

    A frame sent without a copy is lent to ZeroMQ: pyzmq wraps it in a ``zmq.Frame`` and, once
    ZeroMQ lets go, its garbage-collector thread takes the GIL to release it. With ``copy``,
    pyzmq copies the bytes into a message of ZeroMQ's own (no Python object kept, no thread
    woken); the shard sends its replies so (see :meth:`~distconv.sync.ps.server.Shard._reply`).

    Returns:
        With ``track``, a ``zmq.MessageTracker`` of the last frame, done once ZeroMQ has
        handed the whole message to the kernel (frames leave in order); else None (and None
        for a message of one frame, the header, which is copied).

    Raises:
        ValueError: ``track`` and ``copy`` together: a copied message leaves nothing to track.
    """
    if track and copy:
        raise ValueError("send: track=True with copy=True: a copied message has no tracker")
    for part in prefix:
        sock.send(part, _MORE)
    last = len(frames) - 1
    if last == 0 or copy:
        for i, frame in enumerate(frames):
            sock.send(frame, _MORE if i < last else 0)
        return None  # a copied message leaves nothing to track
    sock.send(frames[0], _MORE)
    for i in range(1, last):
        sock.send(frames[i], _MORE, copy=False)
    if not track:
        return sock.send(frames[last], 0, copy=False)
    # pyzmq copies a frame under its copy_threshold (64 KiB) even with copy=False, and the
    # tracker it returns then is done at once; a Frame of our own is never copied, so its
    # tracker is done only once ZeroMQ has let go of the message
    return sock.send(zmq.Frame(frames[last], copy=False, track=True), 0, copy=False, track=True)


def _frame(array: np.ndarray) -> memoryview | bytes:
    """The array's bytes as one frame, without a copy (an empty array is an empty frame)."""
    return memoryview(array).cast("B") if array.nbytes else b""


def dtype_name(dtype: Any, allowed: Mapping[str, np.dtype] = DTYPES, whose: str = "") -> str:
    """The wire name of ``dtype``, or WireError if it may not travel (as one of ``allowed``:
    ``VALUE_DTYPES`` for a parameter; ``whose`` starts the error: ``"parameter 'w': "``)."""
    name = _WIRE_NAMES.get(dtype) if isinstance(dtype, np.dtype) else None
    if name is None:
        name = _WIRE_NAMES.get(np.dtype(dtype))
    if name is None or name not in allowed:
        raise WireError(f"{whose}dtype {np.dtype(dtype)} cannot travel; allowed: {sorted(allowed)}")
    return name


def packed_values(arrays: Sequence[np.ndarray], nbytes: int) -> np.ndarray:
    """The one ``uint8`` frame of a reply's dense values, checked against the ``nbytes`` its
    blocks need before any of it is read.

    Raises:
        WireError: not exactly one 1-D ``uint8`` array of ``nbytes`` bytes.
    """
    if len(arrays) != 1 or arrays[0].dtype != DTYPES["uint8"] or arrays[0].ndim != 1:
        got = ", ".join(f"{a.dtype}{list(a.shape)}" for a in arrays) or "none"
        raise WireError(f"values must come as one uint8 frame of {nbytes} bytes, got {got}")
    if arrays[0].nbytes != nbytes:
        raise WireError(
            f"values frame of {arrays[0].nbytes} bytes, the blocks asked for need {nbytes}"
        )
    return arrays[0]


def unpack_header(
    frame: bytes | memoryview, *, request: bool = True, frames_after: int = 0
) -> dict[str, Any]:
    """Decode and check a header frame.

    Args:
        frame: the first frame of a message.
        request: check a request's required fields (False: a reply, which needs only the
            common ones).
        frames_after: how many frames of the message follow this one (a 0-byte header
            before others is told as a REQ socket's delimiter).

    Raises:
        WireError: empty, not msgpack, not a map, wrong version, unknown op, missing or
            mistyped field.
    """
    if len(frame) == 0:  # msgpack's words for it named an exception class, not the cause
        raise WireError(f"empty message: its header frame has 0 bytes{_delimiter(frames_after)}")
    if len(frame) > MAX_HEADER_BYTES:
        raise WireError(f"header of {len(frame)} bytes exceeds {MAX_HEADER_BYTES}")
    try:
        header = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several types for garbage; all mean the same
        raise WireError(f"header is not msgpack: {type(exc).__name__}") from None
    if type(header) is not dict:
        raise WireError(f"header must be a map, got {type(header).__name__}")
    try:
        if header.get("v") != PROTOCOL_VERSION or type(header.get("v")) is not int:
            from distconv.sync.ps.releases import version_error  # (it imports this module)

            raise version_error(header.get("v"))
        op = header.get("op")
        if request and (type(op) is not str or op not in NEEDED):
            raise WireError(f"unknown op {short(op)}; known: {sorted(REQUIRED)}")
        for key in NEEDED[op] if request else ("v", "op", "arrays"):
            if key not in header:
                raise WireError(f"op {op!r}: header lacks {key!r}")
        for key, value in header.items():
            allowed = TYPES.get(key)
            if allowed is not None and type(value) not in allowed:
                raise WireError(f"header field {key!r} has type {type(value).__name__}")
    except WireError as exc:  # the reply can still say which request it refuses
        exc.rid = header["id"] if type(header.get("id")) is int else -1
        exc.header = header  # and the shard whose hello it was (handlers._heard_refused_hello)
        raise
    return header


def _delimiter(frames_after: int) -> str:
    """What an empty header frame before ``frames_after`` others most likely is: a REQ
    socket's empty delimiter, its header behind it, whose client waits for ever (a REQ drops
    the reply, which lacks the delimiter); "" where none follow."""
    if not frames_after:
        return ""
    return (
        f", before {frames_after} more (a REQ socket's empty delimiter: a shard answers "
        "DEALER sockets, [header, array_0, ...], and a REQ socket drops its reply)"
    )


def unpack_arrays(
    header: Mapping[str, Any], frames: Sequence[Any], max_bytes: int = MAX_MESSAGE_BYTES
) -> list[np.ndarray]:
    """The arrays of a message whose header was checked, as views of the frames (writable
    when the frames are, as ZeroMQ's received frames are: the shard sums into them).

    Every check runs before the first frame becomes an array: the frames' total size against
    ``max_bytes`` (the cap is per message, whatever the size of each frame), then the table
    (dtypes, shapes, the sizes it declares), then each frame's size against its entry.

    Raises:
        WireError: the frames together exceed ``max_bytes``, or frame count, dtype, shape or
            byte count differ from the table.
    """
    table = header["arrays"]
    if len(table) != len(frames):
        raise WireError(f"header lists {len(table)} arrays, message has {len(frames)} frames")
    buffers = [memoryview(f) for f in frames]
    total = sum(b.nbytes for b in buffers)
    if total > max_bytes:
        raise WireError(
            f"message of {len(buffers)} array frames holds {total} bytes, more than the "
            f"{max_bytes} of --max-message-bytes"
        )
    entries = [_entry(i, entry, max_bytes) for i, entry in enumerate(table)]
    sizes = [math.prod(shape) * dtype.itemsize for dtype, shape in entries]
    if sum(sizes) > max_bytes:
        raise WireError(f"header declares {sum(sizes)} array bytes, more than {max_bytes}")
    for i, (buf, nbytes, (dtype, shape)) in enumerate(zip(buffers, sizes, entries)):
        if table[i][2] != nbytes or buf.nbytes != nbytes:
            raise WireError(
                f"array {i}: shape {shape} of {dtype.name} is {nbytes} bytes, header says "
                f"{table[i][2]}, frame has {buf.nbytes}"
            )
    return [
        np.frombuffer(buf, dtype=dtype).reshape(shape)
        for buf, (dtype, shape) in zip(buffers, entries)
    ]


#: the request ops that carry array frames (a pull only of rows: their ids); the others
#: carry none, and a request of them with arrays is refused
ARRAY_OPS = ("seed", "push", "set_state", "pull")


def refuse_stray_arrays(header: Mapping[str, Any], frames: int) -> None:
    """WireError where a request of an op that carries no arrays (``stats``, ``hello``, a pull
    of whole blocks, ...) lists any in its table or comes with ``frames`` array frames: such
    a request was answered ``ok`` with 640 MB held, as any peer could make a shard do."""
    op = header["op"]
    if op in ARRAY_OPS and (op != "pull" or "rows" in header):
        return
    if header["arrays"] or frames:
        what = "a pull of whole blocks" if op == "pull" else f"a {op} request"
        raise WireError(
            f"{what} carries no arrays; this one lists {len(header['arrays'])} and came with "
            f"{frames} array frame(s)"
        )


def _entry(i: int, entry: Any, max_bytes: int) -> tuple[np.dtype, tuple[int, ...]]:
    """One table entry as (dtype, shape), checked before any array exists: a dtype name that is
    a string on the allow-list (a list or map would not even hash), at most 8 non-negative int
    dimensions whose non-zero ones, times the item size, fit ``max_bytes`` (``[0, 2**63]``
    describes 0 bytes, yet numpy cannot shape an array so). Each refusal names the rule that
    failed: a client's int32 row ids were refused as "not [dtype, shape, nbytes]"."""
    if type(entry) is not list or len(entry) != 3:
        raise WireError(f"array {i}: entry {short(entry)} is not [dtype, shape, nbytes]")
    name, dims, nbytes = entry
    if type(name) is not str or name not in DTYPES:
        raise WireError(f"array {i}: dtype {short(name)} is not one of {', '.join(DTYPES)}")
    if (problem := shape_problem(dims)) is not None:
        raise WireError(f"array {i}: {problem}")
    if type(nbytes) is not int:
        raise WireError(f"array {i}: nbytes {short(nbytes)} is not an int")
    dtype, shape = DTYPES[name], tuple(dims)
    spanned = math.prod(n for n in shape if n) * dtype.itemsize
    if spanned > max_bytes:
        raise WireError(
            f"array {i}: shape {short(dims)} declares {spanned} bytes in its non-zero "
            f"dimensions, more than {max_bytes}"
        )
    return dtype, shape


def shape_problem(value: Any, max_dims: int = 8) -> str | None:
    """What is wrong with ``value`` as a shape (a list of at most ``max_dims`` ints >= 0,
    never bools), in words that quote it; None where nothing is."""
    if type(value) is not list:
        return f"shape {short(value)} is not a list"
    if len(value) > max_dims:
        return f"shape {short(value)} has {len(value)} dimensions, at most {max_dims}"
    for n in value:
        if type(n) is not int or n < 0:
            return f"shape {short(value)} has {short(n)}: dimensions are ints >= 0, never bools"
    return None


def is_shape(value: Any, max_dims: int = 8) -> bool:
    """Whether ``value`` is a list of at most ``max_dims`` non-negative ints (never bools)."""
    return shape_problem(value, max_dims) is None


def int_list(header: Mapping[str, Any], key: str) -> list[int]:
    """``header[key]`` as a list of ints, or WireError naming the field."""
    values = header[key]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise WireError(f"header field {key!r} must be a list of integers")
    return values


def json_map(text: str, what: str) -> dict[str, Any]:
    """``text`` (a header's string field, such as a job description) as a JSON map, or
    WireError naming ``what``."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json parses
        value = None
    if type(value) is not dict:
        raise WireError(f"{what} {short(text)} is not a JSON map")
    return value


def check_rows(array: np.ndarray, spec: ParamSpec, rows: int, what: str) -> None:
    """WireError unless ``array`` is ``rows`` rows of ``spec`` in ``spec``'s dtype: values or
    gradients of one block, on either side of the wire."""
    shape = (rows, spec.row_len)
    if array.shape != shape or array.dtype != VALUE_DTYPES[spec.dtype]:
        raise WireError(
            f"{what} of {spec.name}: {array.dtype}{list(array.shape)}, expected "
            f"{spec.dtype}{list(shape)}"
        )


def check_row_ids(rows: np.ndarray, count: int, start: int, stop: int, what: str) -> None:
    """WireError unless ``rows`` holds ``count`` int64 row ids, strictly increasing, all in
    ``start:stop``: one block's ids in a sparse request or reply (checked before any use)."""
    ok = rows.dtype == DTYPES["int64"] and rows.shape == (count,)
    if not ok or (count and (rows[0] < start or rows[-1] >= stop)):
        raise WireError(f"{what}: row ids must be {count} int64 in {start}:{stop}")
    # compared, not subtracted: np.diff wraps around int64, so ids that climb to 2**63 - 1
    # and go on from -2**63 looked increasing, and only the first and last are range-checked
    if count > 1 and not (rows[1:] > rows[:-1]).all():
        raise WireError(f"{what}: row ids must increase strictly")
