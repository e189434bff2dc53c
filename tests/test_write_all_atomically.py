"""``write_all_atomically`` replaces its files all or none.

When a rename fails after others were done, the targets renamed before it are put back, and
nothing staged stays.

It replaces another user's file it may not read, in a folder that lets it, as a plain rename
over it did: such a file can be neither hard-linked (``fs.protected_hardlinks``) nor copied to
keep it until every rename is done, and the whole write was refused with ``Permission denied``.
It is moved aside instead, and put back, owner, mode and bytes, when a later rename fails. Those
tests run as ``nobody`` against root's file (as root).

A target is put back also when an interrupt (Ctrl-C: a KeyboardInterrupt raised as the rename
in progress returns) comes between a rename and its bookkeeping: the target was put back only
once listed as done, after its rename. A target moved aside was then lost, its only copy
``.<name>.old`` deleted; a target renamed over kept its new bytes while the rest were put back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from distconv import files
from distconv.files import write_all_atomically
from tests.child_env import child_path

NOBODY = 65534
SETPRIV = shutil.which("setpriv")
as_another_user = pytest.mark.skipif(
    os.geteuid() != 0 or SETPRIV is None, reason="needs root (and setpriv) to be another user"
)


def test_a_rename_that_fails_puts_back_the_targets_renamed_before_it(tmp_path):
    kept, fresh, blocked = tmp_path / "a.yaml", tmp_path / "c.yaml", tmp_path / "b.yaml"
    kept.write_bytes(b"old a\n")
    linked = tmp_path / "l.yaml"
    os.symlink("a.yaml", linked)  # a link is replaced as a file: it comes back as a link
    blocked.mkdir()  # a folder where the last file goes: its rename fails
    (blocked / "inside").write_bytes(b"x")
    files = {kept: b"new a\n", linked: b"new l\n", fresh: b"new c\n", blocked: b"new b\n"}
    with pytest.raises(OSError):
        write_all_atomically(files)
    assert kept.read_bytes() == b"old a\n"  # was: b"new a\n", beside the old b.yaml
    assert os.readlink(linked) == "a.yaml"
    assert not fresh.exists()  # was: c.yaml of the new set
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.yaml", "l.yaml"]
    assert (blocked / "inside").read_bytes() == b"x"


def test_the_files_are_all_replaced_when_every_rename_goes(tmp_path):
    kept, fresh = tmp_path / "a.yaml", tmp_path / "c.yaml"
    kept.write_bytes(b"old a\n")
    write_all_atomically({kept: b"new a\n", fresh: b"new c\n"})
    assert (kept.read_bytes(), fresh.read_bytes()) == (b"new a\n", b"new c\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "c.yaml"]


def _as_nobody(code: str) -> subprocess.CompletedProcess:
    ids = [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    env = {**os.environ, "PYTHONPATH": child_path()}
    return subprocess.run(
        [SETPRIV, *ids, sys.executable, "-c", code], env=env, capture_output=True, text=True
    )


@pytest.fixture
def shared():
    """A folder anybody may write in (not sticky), holding root's a.yaml, mode 600."""
    if _as_nobody("import distconv").returncode:
        pytest.skip("user nobody cannot import this copy of distconv")
    folder = Path(tempfile.mkdtemp(prefix="shared-"))
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


@as_another_user
@pytest.mark.timeout(60)
def test_another_users_unreadable_file_is_replaced(shared):
    done = _write(shared, ["a.yaml", "c.yaml"])
    assert done.returncode == 0, done.stderr  # was: PermissionError on a.yaml
    assert (shared / "a.yaml").read_bytes() == b"new a.yaml\n"
    assert (shared / "a.yaml").stat().st_uid == NOBODY
    assert (shared / "c.yaml").read_bytes() == b"new c.yaml\n"
    assert sorted(p.name for p in shared.iterdir()) == ["a.yaml", "c.yaml"]


@as_another_user
@pytest.mark.timeout(60)
def test_it_comes_back_as_it_was_when_a_later_rename_fails(shared):
    (shared / "b.yaml").mkdir()  # a folder where the last file goes: its rename fails
    done = _write(shared, ["a.yaml", "c.yaml", "b.yaml"])
    assert done.returncode == 1 and "IsADirectoryError" in done.stderr, done.stderr
    st = (shared / "a.yaml").stat()
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o600)
    assert (shared / "a.yaml").read_bytes() == b"old a\n"
    assert sorted(p.name for p in shared.iterdir()) == ["a.yaml", "b.yaml"]


def _interrupt_after(monkeypatch, src_name: str) -> None:
    """``os.replace`` as it is, but a KeyboardInterrupt once a rename from ``src_name`` is done."""
    replace = os.replace

    def interrupted(src, dst, *args, **kwargs):
        replace(src, dst, *args, **kwargs)
        if os.path.basename(src) == src_name:
            raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", interrupted)


def test_an_interrupt_right_after_a_rename_puts_that_target_back(tmp_path, monkeypatch):
    a, c = tmp_path / "a.yaml", tmp_path / "c.yaml"
    a.write_bytes(b"old a\n")
    c.write_bytes(b"old c\n")
    _interrupt_after(monkeypatch, ".c.yaml.new")
    with pytest.raises(KeyboardInterrupt):
        files.write_all_atomically({a: b"new a\n", c: b"new c\n"})
    monkeypatch.undo()
    assert (a.read_bytes(), c.read_bytes()) == (b"old a\n", b"old c\n")  # c was: b"new c\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "c.yaml"]


@as_another_user
@pytest.mark.timeout(60)
def test_an_interrupt_right_after_moving_a_target_aside_puts_it_back(shared):
    new = {str(shared / n): f"new {n}\n".encode() for n in ("c.yaml", "a.yaml")}
    done = _as_nobody(
        "import os; from pathlib import Path; from distconv import files\n"
        "replace = os.replace\n"
        "def interrupted(src, dst):\n"
        "    replace(src, dst)\n"
        "    if os.path.basename(src) == 'a.yaml':  # a.yaml moved aside: Ctrl-C then\n"
        "        raise KeyboardInterrupt\n"
        "files.os.replace = interrupted\n"
        f"files.write_all_atomically({{Path(k): v for k, v in {new!r}.items()}})"
    )
    assert done.returncode and "KeyboardInterrupt" in done.stderr, done.stderr
    st = (shared / "a.yaml").stat()  # was: a.yaml gone, and its only copy .a.yaml.old deleted
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o600)
    assert (shared / "a.yaml").read_bytes() == b"old a\n"
    assert sorted(p.name for p in shared.iterdir()) == ["a.yaml"]


def test_a_copy_cut_short_is_never_put_back_for_the_whole_file(tmp_path, monkeypatch):
    # a guard for the above: a target is now put back from its first step, so a copy that an
    # interrupt cut short must not stand for it (no hard links here, as on vfat or some mounts)
    a = tmp_path / "a.yaml"
    a.write_bytes(b"old a, the whole of it\n")
    copy2 = files.shutil.copy2

    def cut(src, dst, **kwargs):
        copy2(src, dst, **kwargs)
        os.truncate(dst, 3)
        raise KeyboardInterrupt

    def no_link(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(files.os, "link", no_link)
    monkeypatch.setattr(files.shutil, "copy2", cut)
    with pytest.raises(KeyboardInterrupt):
        files.write_all_atomically({a: b"new a\n"})
    monkeypatch.undo()
    assert a.read_bytes() == b"old a, the whole of it\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml"]
