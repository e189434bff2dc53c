"""A shard whose disk fills makes room by pruning and says so once: pruning followed only a
written part, so a disk full of old parts stayed full for the rest of the job, and the shard
and the chief warned of the unwritten part at every checkpoint.

Real ``distconv train`` runs against two real shards on 127.0.0.1. Shard 1 writes its parts on
a real tmpfs, mounted in a mount namespace of its own (``unshare -rm``): a real full disk,
``ENOSPC`` from the kernel as a shard meets it, which no file-size limit (``EFBIG``, not a full
disk) nor ``/dev/full`` (no folder a part is renamed into) gives. The tmpfs holds two and a half
of shard 1's parts (their size measured in a reference run on a plain folder), and comes filled
with two parts of a rolled-back attempt (steps 90 and 91) and a small ``steplast`` part. With
``--keep-checkpoints 3``: step 2 finds no room, prunes the rolled-back parts and is written on
the second try; step 4 is written; step 6 finds no room beside the two parts it keeps and is
not written, nor any after: one warning in each log, not one per checkpoint.

A chief then asks one shard, on a 64 KiB tmpfs of its own, for parts step by step while the
test fills that disk with a file no prune takes, empties it, and puts a file in the parts'
folder's place (through ``/proc/PID/root``, the shard's view of its mounts): each log warns at
the first failure of each kind, says when the disk took a part again, and nothing in between.
The same shard on its tmpfs then shows the edges: a second setup of the same sync (a
notebook's second fit) warns again, a prune that frees too little is still one warning, a disk
with no inode for the parts' folder warns of no prune, and ``--keep-parts 0`` prunes nothing.
"""

from __future__ import annotations

import errno
import itertools
import json
import logging
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from ps_helpers import Shards, insecure_worker, parts_job, shard_argv, small_net

from tests.mounts import needs_mounts

pytestmark = [pytest.mark.timeout(180), needs_mounts]

#: two epochs of Adam, a checkpoint every 2 steps, 3 checkpoints kept (shards' parts too)
TRAIN = ["--data", "synthetic", "--batch-size", "64", "--epochs", "2", "--no-progress",
         "--optimizer", "adam", "--checkpoint-every", "2", "--keep-checkpoints", "3"]  # fmt: skip

#: ``unshare -rm sh -c FULL FOLDER BYTES PAGES ARGV``: ARGV run with a tmpfs of PAGES pages on
#: FOLDER, holding two parts of BYTES of a rolled-back attempt and a ``steplast`` part
FULL = """mount -t tmpfs -o size=$(($2 * 4096)) distconv-test "$0" &&
for step in 90 91; do head -c "$1" /dev/zero > "$0/pserver-shard1-step$step.safetensors"; done &&
echo last > "$0/pserver-shard1-steplast.safetensors" && shift 2 && exec "$@"
"""

PAGE = 4096


def _train(tmp_path: Path, part_bytes: int | None) -> tuple[subprocess.CompletedProcess, str]:
    """:func:`parts_job`; where ``part_bytes`` is given, shard 1's folder is the full tmpfs the
    module describes, for parts of that size."""
    wrapper = []
    if part_bytes is not None:
        pages = -(-part_bytes // PAGE)
        size = str(2 * pages + pages // 2)  # two parts and a half, in whole pages
        folder = str(tmp_path / "parts" / "s1")
        wrapper = ["unshare", "-rm", "sh", "-c", FULL, folder, str(part_bytes), size]
    return parts_job(tmp_path, TRAIN, wrapper)


def _listed(out: Path) -> dict[int, list[str]]:
    """Each kept checkpoint's step -> the shards' parts its manifest lists."""
    manifests = sorted(out.glob("step-*.json"))
    return {
        int(m.stem.removeprefix("step-")): sorted(json.loads(m.read_text())["remote"])
        for m in manifests
    }


def test_a_full_disk_is_pruned_written_again_and_warned_of_once(tmp_path):
    written, _ = _train(tmp_path / "written", None)
    assert written.returncode == 0, written.stderr[-2000:]
    # the largest: a part's metadata (its step, the steps completed) differs by a few bytes
    size = max(p.stat().st_size for p in (tmp_path / "written" / "parts" / "s1").iterdir())
    done, shards_log = _train(tmp_path / "full", size)
    assert done.returncode == 0, done.stderr[-2000:]

    listed = _listed(tmp_path / "full" / "out" / "checkpoints")
    assert len(listed) == 3 and min(listed) >= 6, listed  # the run went past step 6
    assert all(parts == ["pserver-shard0"] for parts in listed.values()), listed

    chief = [line for line in done.stderr.splitlines() if "wrote no part" in line]
    assert len(chief) == 1, chief  # one warning, not one per checkpoint
    assert "checkpoint 6: pserver shard 1 (" in chief[0], chief[0]
    assert "no space left on device" in chief[0] and "said once" in chief[0], chief[0]
    # (the steplast part SIGTERM writes at the end finds no room either, said on its own)
    numbered = r"shard 1: cannot save checkpoint .*-step(\d+)\.safetensors"
    unwritten = re.findall(numbered, shards_log)
    assert unwritten == ["6"], unwritten
    # step 2 made its room: the rolled-back parts pruned, never the steplast one
    pruned = "shard 1: no room for the part of step 2: pruned 2 old part(s), writing it again"
    assert pruned in shards_log, shards_log[-3000:]
    assert "part of step 6: pruned" not in shards_log  # the two kept parts stay
    assert "took its part again" not in done.stderr + shards_log
    assert "Traceback" not in shards_log


#: ``unshare -rm sh -c ON_TMPFS FOLDER OPTIONS ARGV``: ARGV run with a tmpfs of OPTIONS (64
#: KiB) on FOLDER
ON_TMPFS = 'mount -t tmpfs -o "$1" distconv-test "$0" && shift && exec "$@"'


def _fill(folder: Path) -> None:
    """Fill the disk of ``folder`` with a file of the operator's, no part: none a prune takes."""
    disk = os.statvfs(folder)
    assert disk.f_blocks * disk.f_frsize <= 64 * 1024, folder  # the tmpfs, never a real disk
    with open(folder / "other.bin", "wb", buffering=0) as f:
        try:
            while f.write(b"\0" * PAGE):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


def _said(lines: list[str]) -> list[str]:
    """What each of ``lines`` said of a part: ``"unwritten N: why"`` or ``"again N"``."""
    said = []
    for line in lines:
        if match := re.search(r"-step(\d+)\.safetensors: ([^;]+);", line):
            said.append(f"unwritten {match[1]}: {match[2]}")
        elif match := re.search(r"(?:checkpoint|step) (\d+)\D.*took its part again|"
                                r"took its part again at step (\d+)", line):  # fmt: skip
            said.append(f"again {match[1] or match[2]}")
    return said


def _shard_on_tmpfs(
    shards: Shards, tmp_path: Path, options: str = "size=64k", flags: Sequence[str] = ()
) -> tuple[str, Path, Path]:
    """One shard writing its parts in ``parts`` on a tmpfs of its own, mounted with
    ``options``, started with ``flags`` too: its endpoint, the mount point as the test names
    it and the disk as the shard sees it."""
    mount = tmp_path / "disk"
    mount.mkdir()
    argv = shard_argv(["-m", "distconv"], shard=0, shards=1)
    argv += ["--checkpoint-dir", str(mount / "parts"), *flags]
    endpoint = shards.launch(["unshare", "-rm", "sh", "-c", ON_TMPFS, str(mount), options, *argv],
                             tmp_path / "shard.log")  # fmt: skip
    # the shard's own view of its tmpfs (``unshare`` execs the shard: the same process)
    return endpoint, mount, Path(f"/proc/{shards.procs[-1].pid}/root") / str(mount).lstrip("/")


def test_each_kind_of_unwritten_part_is_warned_of_once_and_its_end_too(shards, tmp_path, caplog):
    endpoint, mount, disk = _shard_on_tmpfs(shards, tmp_path)
    net, sync = small_net(), insecure_worker([endpoint], optimizer="adam")
    caplog.set_level(logging.WARNING, logger="distconv.pserver")
    try:
        sync.setup(net.parameters())
        sync.save_remote_parts(5, keep=5)  # makes the folder
        _fill(disk)
        for step in (10, 20):  # no room, and nothing of a prune's to free: the same twice
            assert sync.save_remote_parts(step, keep=5) == {}
        assert sorted(p.name for p in (disk / "parts").iterdir()) == [
            "pserver-shard0-step5.safetensors"  # no partial part left behind
        ]
        (disk / "other.bin").unlink()
        for step in (30, 40):  # room again: said once
            assert list(sync.save_remote_parts(step, keep=5)) == ["pserver-shard0"]
        _fill(disk)
        assert sync.save_remote_parts(50, keep=5) == {}  # full again: said again
        (disk / "other.bin").unlink()
        for part in (disk / "parts").iterdir():
            part.unlink()
        (disk / "parts").rmdir()
        (disk / "parts").write_text("")  # another kind: a file in the folder's place
        for step in (60, 70):
            assert sync.save_remote_parts(step, keep=5) == {}
    finally:
        sync.close()
        shards.stop()
    full, in_the_way = "no space left on device", f"{mount / 'parts'} is a file, not a folder"
    expected = [f"unwritten 10: {full}", "again 30", f"unwritten 50: {full}",
                f"unwritten 60: {in_the_way}"]  # fmt: skip
    chief = [r.getMessage() for r in caplog.records if "pserver shard 0" in r.getMessage()]
    assert _said(chief) == expected, chief
    assert _said(shards.log_text().splitlines()) == expected, shards.log_text()


def test_a_second_fit_on_the_same_sync_warns_of_a_full_disk_again(shards, tmp_path, caplog):
    # a notebook's second fit (or a resume in the same process) sets the same sync up again,
    # and seeds the shards again: its checkpoints lacked the shard's parts without a word in
    # either log, the first fit's warning long out of view
    endpoint, _, disk = _shard_on_tmpfs(shards, tmp_path)
    net, sync = small_net(), insecure_worker([endpoint], optimizer="adam")
    caplog.set_level(logging.WARNING, logger="distconv.pserver")
    try:
        sync.setup(net.parameters())
        sync.save_remote_parts(5, keep=5)  # makes the folder
        _fill(disk)
        assert sync.save_remote_parts(10, keep=5) == {}
        sync.setup(net.parameters())  # the second fit
        for step in (20, 30):
            assert sync.save_remote_parts(step, keep=5) == {}
    finally:
        sync.close()
        shards.stop()
    full = "no space left on device"
    chief = [r.getMessage() for r in caplog.records if "pserver shard 0" in r.getMessage()]
    expected = [f"unwritten 10: {full}", f"unwritten 20: {full}"]
    assert _said(chief) == expected, chief
    assert _said(shards.log_text().splitlines()) == expected, shards.log_text()


def test_a_part_still_too_big_after_the_prune_is_warned_of_once(shards, tmp_path, caplog):
    endpoint, _, disk = _shard_on_tmpfs(shards, tmp_path)
    net, sync = small_net(), insecure_worker([endpoint], optimizer="adam")
    caplog.set_level(logging.WARNING, logger="distconv.pserver")
    try:
        sync.setup(net.parameters())
        sync.save_remote_parts(5, keep=5)  # makes the folder
        # a rolled-back attempt's part of a page: the prune frees it, too little for a part
        (disk / "parts" / "pserver-shard0-step99.safetensors").write_text("x")
        _fill(disk)
        for step in (10, 20):  # pruned, tried again and failed; then nothing left to prune
            assert sync.save_remote_parts(step, keep=5) == {}
        kept = sorted(p.name for p in (disk / "parts").iterdir())
    finally:
        sync.close()
        shards.stop()
    assert kept == ["pserver-shard0-step5.safetensors"], kept  # the kept part stays
    full = "no space left on device"
    chief = [r.getMessage() for r in caplog.records if "pserver shard 0" in r.getMessage()]
    assert _said(chief) == [f"unwritten 10: {full}"], chief
    log_text = shards.log_text()
    assert _said(log_text.splitlines()) == [f"unwritten 10: {full}"], log_text
    assert "no room for the part of step 10: pruned 1 old part(s), writing it again" in log_text
    assert "part of step 20: pruned" not in log_text and "Traceback" not in log_text


def test_no_room_for_the_parts_folder_itself_is_one_warning(shards, tmp_path, caplog):
    # a disk with no inode left: not even the parts' folder can be made, so a prune has no
    # folder to look in; it warned "not pruning old checkpoint parts now: ... No such file or
    # directory" at every checkpoint, beside the part's own warning said once
    endpoint, _, disk = _shard_on_tmpfs(shards, tmp_path, "size=64k,nr_inodes=8")
    net, sync = small_net(), insecure_worker([endpoint], optimizer="adam")
    assert os.statvfs(disk).f_files <= 8, disk  # the tmpfs, never a real disk
    for i in itertools.count():  # every inode the tmpfs has, with empty files of no part's
        try:
            (disk / f"other{i}").touch()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
            break
    try:
        sync.setup(net.parameters())
        for step in (10, 20):
            assert sync.save_remote_parts(step, keep=5) == {}
    finally:
        sync.close()
        shards.stop()
    log_text = shards.log_text()
    assert "not pruning" not in log_text and "Traceback" not in log_text, log_text
    assert _said(log_text.splitlines()) == ["unwritten 10: no space left on device"], log_text


def test_keep_parts_0_keeps_every_part_on_a_full_disk(shards, tmp_path, caplog):
    # --keep-parts 0 (a request without keep) keeps everything, so a prune has nothing it may
    # take, not even a rolled-back attempt's part, which a part written then keeps too
    endpoint, _, disk = _shard_on_tmpfs(shards, tmp_path, flags=["--keep-parts", "0"])
    net, sync = small_net(), insecure_worker([endpoint], optimizer="adam")
    try:
        sync.setup(net.parameters())
        sync.save_remote_parts(5)  # makes the folder
        (disk / "parts" / "pserver-shard0-step99.safetensors").write_text("x")
        _fill(disk)
        assert sync.save_remote_parts(10) == {}
        kept = sorted(p.name for p in (disk / "parts").iterdir())
    finally:
        sync.close()
        shards.stop()
    assert kept == [f"pserver-shard0-step{s}.safetensors" for s in (5, 99)], kept
    log_text = shards.log_text()
    assert "pruned" not in log_text and "Traceback" not in log_text, log_text
    assert _said(log_text.splitlines()) == ["unwritten 10: no space left on device"], log_text
