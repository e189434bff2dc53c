"""A FUSE file system for tests, spoken straight to ``/dev/fuse`` (no library): one file,
``x``, whose inode number is chosen, its attributes valid for 0 s, so each ``stat`` asks this
daemon, and one made while it is stopped (SIGSTOP) waits for ever, as one on a FUSE or NFS
server that is gone does.

``python fuse_stub.py MOUNTPOINT INODE`` mounts it (root only), prints ``mounted`` and serves
until killed.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
import sys

#: the FUSE requests answered (opcodes of linux/fuse.h); others get ENOSYS
_LOOKUP, _FORGET, _GETATTR, _OPEN, _RELEASE, _FLUSH, _INIT = 1, 2, 3, 14, 18, 25, 26
_OPENDIR, _RELEASEDIR, _BATCH_FORGET = 27, 29, 42
#: fuse_attr, fuse_entry_out's and fuse_attr_out's leading fields, fuse_init_out (7.31)
_ATTR, _ENTRY, _ATTR_OUT, _INIT_OUT = "<6Q10I", "<4Q2I", "<Q2I", "<4I2H2I2HI7I"
_MS_NOSUID_NODEV = 2 | 4


def _attr(node: int, inode: int) -> bytes:
    """The root (node 1), a directory, or ``x``, a file of inode number ``inode``."""
    mode = stat.S_IFDIR | 0o755 if node == 1 else stat.S_IFREG | 0o644
    return struct.pack(
        _ATTR, 1 if node == 1 else inode, 0, 0, 0, 0, 0, 0, 0, 0, mode, 1, 0, 0, 0, 4096, 0
    )


def serve(mountpoint: str, inode: int) -> None:
    """Mount the file system at ``mountpoint`` and answer its requests until killed."""
    fuse = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"fd={fuse},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"fuse_stub", mountpoint.encode(), b"fuse", _MS_NOSUID_NODEV, options):
        raise OSError(ctypes.get_errno(), f"cannot mount {mountpoint}")
    print("mounted", flush=True)
    while True:
        request = os.read(fuse, 1 << 20)
        _, opcode, unique, node = struct.unpack_from("<IIQQ", request)
        if opcode in (_FORGET, _BATCH_FORGET):
            continue
        error, body = 0, b""
        if opcode == _INIT:
            body = struct.pack(_INIT_OUT, 7, 31, 0, 0, 16, 12, 1 << 16, 1, 0, 0, 0, *[0] * 7)
        elif opcode == _LOOKUP and request[40:].split(b"\0")[0] == b"x":
            body = struct.pack(_ENTRY, 2, 0, 0, 0, 0, 0) + _attr(2, inode)
        elif opcode == _GETATTR:
            body = struct.pack(_ATTR_OUT, 0, 0, 0) + _attr(node, inode)
        elif opcode in (_OPEN, _OPENDIR):
            body = struct.pack("<Q2I", 0, 0, 0)
        elif opcode == _LOOKUP:
            error = -2  # ENOENT
        elif opcode not in (_RELEASE, _FLUSH, _RELEASEDIR):
            error = -38  # ENOSYS
        os.write(fuse, struct.pack("<IiQ", 16 + len(body), error, unique) + body)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
