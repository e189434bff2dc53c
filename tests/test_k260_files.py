"""``write_all_atomically`` puts a target back also when an interrupt (Ctrl-C: a
KeyboardInterrupt raised as the rename in progress returns) comes between a rename and its
bookkeeping: the target was put back only once listed as done, after its rename. A target moved
aside (another user's file this one may not read) was then lost, its only copy ``.<name>.old``
deleted; a target renamed over kept its new bytes while the rest were put back (review k260)."""

from __future__ import annotations

import os

import pytest

from distconv import files
from tests.test_k254_files import _as_nobody, shared  # noqa: F401 - shared is a fixture


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


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (and setpriv) to be another user")
@pytest.mark.timeout(60)
def test_an_interrupt_right_after_moving_a_target_aside_puts_it_back(shared):  # noqa: F811
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
