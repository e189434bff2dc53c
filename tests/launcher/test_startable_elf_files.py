"""A file the kernel refuses (``ENOEXEC``) that starts as an ELF binary was "a binary for
another machine" to a child's start (:func:`launcher.startable.not_started`) on its first four
bytes alone, though :func:`~launcher.startable.binary_refused` (an ``mpiexec``'s) reads its
e_machine and keeps the shell's line for a native one: a native binary cut short (half
copied) was named another machine's. Both read the e_machine now."""

from __future__ import annotations

import errno
import shutil
import subprocess
from pathlib import Path

import pytest

from launcher import startable

NATIVE = Path(shutil.which("true") or "/bin/true").read_bytes()


@pytest.mark.parametrize(
    "head", [NATIVE[:64], NATIVE[:16], b"\x7fELF\n"], ids=["64 bytes", "16 bytes", "magic"]
)
def test_a_native_binary_cut_short_is_not_another_machines(tmp_path, head):
    cut = tmp_path / "cut"
    cut.write_bytes(head)
    cut.chmod(0o755)
    with pytest.raises(OSError) as kernel:  # as a child's start gets it
        subprocess.run([cut], check=False)
    assert kernel.value.errno == errno.ENOEXEC, kernel.value
    why = startable.not_started(str(cut), kernel.value)
    assert "another machine" not in why and "truncated" in why, why
    assert startable.binary_refused(str(cut)) is None  # the two agree


def test_a_binary_for_another_machine_is_still_named_so(tmp_path):
    other = tmp_path / "other"
    elf = bytearray(NATIVE)
    elf[18:20] = b"\xef\xbe"  # an e_machine no kernel here runs
    other.write_bytes(elf)
    other.chmod(0o755)
    with pytest.raises(OSError) as kernel:
        subprocess.run([other], check=False)
    why = startable.not_started(str(other), kernel.value)
    assert "binary for another machine" in why and why == startable.binary_refused(str(other))
