"""A run directory whose ``checkpoints`` links to a disk not mounted yet (a replacement node's
mount late) is named as such where a resume meets it: ``--resume auto`` said the run ``holds
files that no distconv run without one leaves (runs/x/checkpoints)`` and ``--resume`` said
``no complete checkpoint``, words a launcher reads as a refusal every attempt meets. Nothing is
deleted, and the link stays for the disk's mount."""

from __future__ import annotations

import re

import pytest

from distconv.run_dir import RunDirError
from tests.test_resume_checks import _trainer, data  # noqa: F401 (a fixture)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("resume", ["auto", True])
def test_a_checkpoints_link_to_a_disk_not_there_is_named_so(data, tmp_path, resume):  # noqa: F811
    train, test = data
    out, disk = tmp_path / "run", tmp_path / "disk" / "c"
    out.mkdir()
    (out / "checkpoints").symlink_to(disk)
    (out / "metrics.jsonl").write_text('{"epoch": 1, "step": 15}\n{"epoch": 2, "step": 30}\n')
    said = f"{out / 'checkpoints'} links to {disk}, which is not there (a disk not mounted yet?)"
    with pytest.raises(RunDirError, match=re.escape(said)):
        _trainer(out).fit(train, test, epochs=1, resume=resume)
    assert (out / "checkpoints").is_symlink() and not (tmp_path / "disk").exists()
    assert (out / "metrics.jsonl").read_text().count("\n") == 2
