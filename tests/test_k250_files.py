"""``write_all_atomically`` replaces its files all or none, also when a rename fails after
others were done: the targets renamed before it are put back, and nothing staged stays."""

from __future__ import annotations

import os

import pytest

from distconv.files import write_all_atomically


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
