"""``write_all_atomically`` replaces another user's file it may not read, in a folder that
lets it, as a plain rename over it did: such a file can be neither hard-linked
(``fs.protected_hardlinks``) nor copied to keep it until every rename is done, and the whole
write was refused with ``Permission denied``. It is moved aside instead, and put back, owner,
mode and bytes, when a later rename fails. Run as ``nobody`` against root's file (as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import distconv

NOBODY = 65534
SETPRIV = shutil.which("setpriv")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or SETPRIV is None, reason="needs root (and setpriv) to be another user"
)


def _as_nobody(code: str) -> subprocess.CompletedProcess:
    ids = [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    env = {**os.environ, "PYTHONPATH": str(Path(distconv.__file__).parents[1])}
    return subprocess.run(
        [SETPRIV, *ids, sys.executable, "-c", code], env=env, capture_output=True, text=True
    )


@pytest.fixture
def shared():
    """A folder anybody may write in (not sticky), holding root's a.yaml, mode 600."""
    if _as_nobody("import distconv").returncode:
        pytest.skip("user nobody cannot import this copy of distconv")
    folder = Path(tempfile.mkdtemp(prefix="k254-"))
    try:
        folder.chmod(0o777)
        (folder / "a.yaml").write_bytes(b"old a\n")
        (folder / "a.yaml").chmod(0o600)
        yield folder
    finally:
        shutil.rmtree(folder)


def _write(folder: Path, names: list[str]) -> subprocess.CompletedProcess:
    files = {str(folder / n): f"new {n}\n".encode() for n in names}
    return _as_nobody(
        "from pathlib import Path; from distconv.files import write_all_atomically; "
        f"write_all_atomically({{Path(k): v for k, v in {files!r}.items()}})"
    )


@pytest.mark.timeout(60)
def test_another_users_unreadable_file_is_replaced(shared):
    done = _write(shared, ["a.yaml", "c.yaml"])
    assert done.returncode == 0, done.stderr  # was: PermissionError on a.yaml
    assert (shared / "a.yaml").read_bytes() == b"new a.yaml\n"
    assert (shared / "a.yaml").stat().st_uid == NOBODY
    assert (shared / "c.yaml").read_bytes() == b"new c.yaml\n"
    assert sorted(p.name for p in shared.iterdir()) == ["a.yaml", "c.yaml"]


@pytest.mark.timeout(60)
def test_it_comes_back_as_it_was_when_a_later_rename_fails(shared):
    (shared / "b.yaml").mkdir()  # a folder where the last file goes: its rename fails
    done = _write(shared, ["a.yaml", "c.yaml", "b.yaml"])
    assert done.returncode == 1 and "IsADirectoryError" in done.stderr, done.stderr
    st = (shared / "a.yaml").stat()
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o600)
    assert (shared / "a.yaml").read_bytes() == b"old a\n"
    assert sorted(p.name for p in shared.iterdir()) == ["a.yaml", "b.yaml"]
