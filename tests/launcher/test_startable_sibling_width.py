"""A binary of this machine's family but of its other width (an i386 one on x86_64), which a
kernel without that width's support refuses (``ENOEXEC``), was called "truncated, damaged or
not an executable" by a child's start (:func:`launcher.startable.not_started`), a confident
wrong reason: it is named as of that width, the kernel's refusal possible."""

from __future__ import annotations

import errno
import os

import pytest

from launcher import startable
from tests.launcher.test_startable_elf_files import NATIVE


def test_a_binary_of_the_host_family_s_other_width_is_named_so(tmp_path):
    own = startable._machines(NATIVE)  # /bin/true: this machine's
    family = next((f for f in startable._FAMILIES if own & f), None)
    if family is None or len(family - own) == 0 or NATIVE[4] not in (1, 2):
        pytest.skip("this host's machine has no 32/64-bit sibling (_FAMILIES)")
    sibling = min(family - own)
    elf = bytearray(NATIVE)
    elf[4] = 3 - NATIVE[4]  # EI_CLASS: 1 for 2 (64-bit), 2 for 1
    order = {1: "little", 2: "big"}[NATIVE[5]]
    elf[18:20] = sibling.to_bytes(2, order)
    other = tmp_path / "other"
    other.write_bytes(elf)
    other.chmod(0o755)
    # the kernel's answer on a host without that width's support (not run: this host may have it)
    refused = OSError(errno.ENOEXEC, os.strerror(errno.ENOEXEC))
    why = startable.not_started(str(other), refused)
    bits = 32 if NATIVE[4] == 2 else 64
    assert why.startswith(f"it is a {bits}-bit binary of this machine's family"), why
    assert "not an executable" not in why and "another machine" not in why, why
