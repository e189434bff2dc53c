"""A shard checks its ``--checkpoint-dir`` when it starts: one it could not write
was found at the first checkpoint request, an epoch or hours in, and the chief, which asks the
shards before it writes its own part, failed the job with no checkpoint at all."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys

import pytest
from ps_helpers import insecure_worker, small_net

from tests.child_env import child_path
from tests.mounts import READ_ONLY, needs_mounts


def _pserver(*extra: str, under: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``distconv pserver`` on 127.0.0.1 port 0 (run by the command ``under`` where given);
    killed (TimeoutExpired) if it keeps serving."""
    cmd = [*under, sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0",
           "--shard", "0", "--num-shards", "1", "--workers", "1", "--insecure", *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": child_path()}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20, env=env)


@needs_mounts
@pytest.mark.timeout(60)
@pytest.mark.parametrize("there", [True, False])
def test_a_checkpoint_dir_on_a_read_only_disk_is_refused_as_such(there, tmp_path):
    """A folder on a read-only disk was refused as one "this process cannot write", the words of
    a permission, where every other message about that disk says "read-only file system"."""
    disk = tmp_path / "disk"
    directory = disk / "parts"
    directory.mkdir(parents=True) if there else disk.mkdir()
    done = _pserver("--checkpoint-dir", str(directory), under=("unshare", "-rm", "sh", "-c",
                    READ_ONLY, str(disk)))  # fmt: skip
    assert done.returncode == 1, done
    why = (
        "read-only file system there"
        if there
        else f"cannot make it: read-only file system in {disk}"
    )
    assert done.stderr.strip().splitlines()[-1].endswith(f"--checkpoint-dir {directory}: {why}"), (
        done
    )
    assert "listening on" not in done.stderr + done.stdout


@pytest.mark.timeout(60)
def test_a_checkpoint_dir_that_cannot_be_made_stops_the_shard_at_start(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    directory = blocker / "parts"  # under a regular file: no one can make it, root neither
    done = _pserver("--checkpoint-dir", str(directory))
    assert done.returncode == 1, done
    assert f"--checkpoint-dir {directory}: cannot make it: {blocker} is a file" in done.stderr
    assert "listening on" not in done.stdout


@pytest.mark.timeout(60)
def test_a_checkpoint_dir_under_a_link_to_nowhere_names_the_link(tmp_path):
    """``runs -> /scratch/runs`` with the scratch unmounted: makedirs said ``File exists``,
    as if an existing folder were the trouble."""
    runs = tmp_path / "runs"
    runs.symlink_to(tmp_path / "scratch" / "runs")
    done = _pserver("--checkpoint-dir", str(runs / "parts"))
    assert done.returncode == 1, done
    said = f"cannot make it: {runs} is a symlink to {tmp_path / 'scratch' / 'runs'}, not there"
    assert said in done.stderr, done.stderr
    assert "listening on" not in done.stdout and not (tmp_path / "scratch").exists()


@pytest.mark.timeout(60)
def test_a_missing_checkpoint_dir_is_made_at_the_first_part_not_at_start(shards, tmp_path):
    """Made at start, it was there before any part: under ``distconv-launch local`` it is the
    chief's ``--out``, and a refused ``--resume`` into a directory not there found the empty
    folder its own shards had made, locked it and left its ``run.lock`` behind. The part then
    written holds the values the worker seeded the shard with."""
    directory = tmp_path / "new" / "parts"
    (endpoint,) = shards.start(1, workers=1, extra=["--checkpoint-dir", str(directory)])
    assert not (tmp_path / "new").exists()  # listening, and nothing made
    net, sync = small_net(), insecure_worker([endpoint])
    try:
        sync.setup(net.parameters())
        written = sync.save_remote_parts(10, keep=2)
    finally:
        sync.close()
    part = directory / "pserver-shard0-step10.safetensors"
    assert written == {"pserver-shard0": str(part)}
    assert [p.name for p in directory.iterdir()] == [part.name]
    assert _part_values(part) == {p.name: p.value.tolist() for p in net.parameters()}


def _part_values(part) -> dict[str, list]:
    """Every parameter a checkpoint part holds, by name, put together from its blocks."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file

    from distconv.sync.ps.blocks import ParamSpec, rows_view

    tensors = load_file(part)
    with safe_open(str(part), "np") as f:
        meta = f.metadata()
    specs = [
        ParamSpec(name, tuple(shape), *rest) for name, shape, *rest in json.loads(meta["params"])
    ]
    values = {spec.name: np.full(spec.shape, np.nan) for spec in specs}
    for bid, param, start, stop in json.loads(meta["table"]):
        spec = specs[param]
        rows = tensors[f"block.{bid}.value"].reshape(stop - start, spec.row_len)
        rows_view(values[spec.name], spec)[start:stop] = rows
    return {name: value.tolist() for name, value in values.items()}


@pytest.mark.timeout(60)
def test_a_part_that_cannot_be_written_is_a_warning_in_one_line_without_a_traceback(
    shards, tmp_path, caplog
):
    """A full disk, a quota or a file in the way fails a part's write: the shard and the chief
    warn naming the file and the cause, the checkpoint goes on without that part, and the shard
    logs no traceback of a "shard error" as for a bug. A directory where the part
    goes fails the write for root too."""
    parts = tmp_path / "parts"
    (parts / "pserver-shard0-step10.safetensors").mkdir(parents=True)
    (endpoint,) = shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])
    _warned_in_one_line(shards, endpoint, parts, "is a directory", caplog)


def _warned_in_one_line(shards, endpoint: str, parts, cause: str, caplog) -> None:
    """The shards' parts of the chief's checkpoint at step 10 are none, and the chief and the
    shard warn naming the part and ``cause``, without a traceback of a "shard error"."""
    net, sync = small_net(), insecure_worker([endpoint], optimizer="adam")
    try:
        sync.setup(net.parameters())
        assert sync.save_remote_parts(10, keep=2) == {}
    finally:
        sync.close()
    said = f"cannot save checkpoint {parts / 'pserver-shard0-step10.safetensors'}: {cause}"
    (chief,) = [r.getMessage() for r in caplog.records if "wrote no part" in r.getMessage()]
    assert said in chief and "only the shards' extra copy" in chief, chief
    shards.stop()
    assert f"shard 0: {said}" in shards.log_text()
    assert "Traceback" not in shards.log_text()


@pytest.mark.timeout(60)
def test_a_checkpoint_dir_gone_and_a_file_in_its_place_is_a_warning_in_one_line(
    shards, tmp_path, caplog
):
    """The directory itself cannot be made at the request (a file put in its place since the
    start, a full disk): that too is a warning naming it, not answered as a ``shard error``
    with a traceback."""
    parts = tmp_path / "parts"
    (endpoint,) = shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])
    parts.write_text("")  # the directory's name taken by a file
    _warned_in_one_line(shards, endpoint, parts, f"{parts} is a file, not a folder", caplog)


@pytest.mark.timeout(60)
def test_a_file_put_above_a_checkpoint_dir_not_made_yet_is_named_and_the_shard_goes_on(
    shards, tmp_path, caplog
):
    """Made at the first part, the folder meets there what the start's check would have named:
    a file put since where a folder above it is to be made. The refusal said ``file exists``
    after the part's path, read as the part being there already; the warning names the file
    now, and the shard writes the next checkpoint once the file is gone."""
    parts = tmp_path / "new" / "parts"
    (endpoint,) = shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])
    (tmp_path / "new").write_text("")
    net, sync = small_net(), insecure_worker([endpoint])
    try:
        sync.setup(net.parameters())
        assert sync.save_remote_parts(10, keep=2) == {}
        part = parts / "pserver-shard0-step10.safetensors"
        said = f"cannot save checkpoint {part}: {tmp_path / 'new'} is a file, not a folder"
        assert any(said in r.getMessage() for r in caplog.records), caplog.text
        (tmp_path / "new").unlink()
        written = sync.save_remote_parts(11, keep=2)
    finally:
        sync.close()
    assert written == {"pserver-shard0": str(parts / "pserver-shard0-step11.safetensors")}
    assert [p.name for p in parts.iterdir()] == ["pserver-shard0-step11.safetensors"]


@pytest.mark.timeout(60)
def test_old_parts_that_cannot_be_pruned_leave_the_written_part_acknowledged(shards, tmp_path):
    """A prune that fails after the part is written (a permission, a read-only remount, here
    an old part's name taken by a directory) failed the chief's checkpoint as a ``shard
    error`` with a traceback, though the part was on disk; it is a warning now, and a later
    prune deletes what this one could not."""
    parts = tmp_path / "parts"
    written = _saved_past_a_part_in_the_way(shards, parts, (10,))
    assert list(written.values()) == [str(parts / "pserver-shard0-step10.safetensors")]
    assert (parts / "pserver-shard0-step10.safetensors").is_file()
    shards.stop()
    said = shards.log_text()
    assert "not pruning old checkpoint parts now" in said and "Traceback" not in said


@pytest.mark.timeout(60)
def test_an_old_part_that_cannot_be_pruned_does_not_keep_the_newer_ones(shards, tmp_path):
    """The prune stopped at the first part it could not delete, the oldest: one that could
    never go (its name taken by a directory) kept every later part for good, a whole shard's
    weights and state per checkpoint, though the warning said a later prune would delete
    them. The others go; the one in the way is warned of."""
    parts = tmp_path / "parts"
    _saved_past_a_part_in_the_way(shards, parts, (10, 20, 30))
    names = sorted(p.name for p in parts.iterdir())
    assert names == [f"pserver-shard0-step{s}.safetensors" for s in (30, 4)], names
    shards.stop()
    said = shards.log_text()
    assert "not pruning old checkpoint parts now" in said and "Traceback" not in said


def _saved_past_a_part_in_the_way(shards, parts, steps) -> dict[str, str]:
    """Checkpoints ``steps`` of one shard keeping 1, where the old part of step 4 cannot be
    pruned (its name taken by a directory); returns the last save's parts."""
    (parts / "pserver-shard0-step4.safetensors").mkdir(parents=True)
    (endpoint,) = shards.start(1, workers=1, extra=["--checkpoint-dir", str(parts)])
    net, sync = small_net(), insecure_worker([endpoint], optimizer="adam")
    try:
        sync.setup(net.parameters())
        for step in steps:
            written = sync.save_remote_parts(step, keep=1)
    finally:
        sync.close()
    return written


@pytest.mark.timeout(60)
def test_a_blank_checkpoint_dir_is_a_usage_error_not_none(tmp_path):
    """``--checkpoint-dir "$PARTS"`` with the variable unset started a shard that writes no
    checkpoint parts, without a word: the chief's first checkpoint (an epoch in, or hours)
    then failed the job on ``shard 0 has no --checkpoint-dir``."""
    done = _pserver("--checkpoint-dir", "")
    assert done.returncode == 2, done
    last = done.stderr.strip().splitlines()[-1]
    assert last == "distconv pserver: error: argument --checkpoint-dir: must not be empty", last
    assert "listening on" not in done.stdout


def _held_port() -> socket.socket:
    """A listening socket on 127.0.0.1 port 0: its port is taken while it is open."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held


@pytest.mark.timeout(60)
@pytest.mark.parametrize("taken", ["--bind", "--health-port"])
def test_a_shard_that_cannot_start_leaves_no_checkpoint_dir_it_made(taken, tmp_path):
    """A shard whose port (or probes' port) was taken made --checkpoint-dir and the folders
    above it, then exited 1 and left them there, empty."""
    directory = tmp_path / "new" / "parts"
    with _held_port() as held:
        port = held.getsockname()[1]
        flags = (
            ("--bind", f"127.0.0.1:{port}") if taken == "--bind" else ("--health-port", f"{port}")
        )
        done = _pserver(*flags, "--checkpoint-dir", str(directory))
    assert done.returncode == 1, done
    assert f"127.0.0.1:{port}" in done.stderr and "ddress already in use" in done.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.timeout(60)
def test_a_shard_that_cannot_start_keeps_a_checkpoint_dir_that_was_there(tmp_path):
    directory = tmp_path / "parts"
    directory.mkdir()
    with _held_port() as held:
        done = _pserver(
            "--bind", f"127.0.0.1:{held.getsockname()[1]}", "--checkpoint-dir", str(directory)
        )
    assert done.returncode == 1, done
    assert directory.is_dir()


@pytest.mark.parametrize("there", [True, False])
def test_a_checkpoint_dir_this_process_cannot_write_is_refused_and_not_made(
    there, monkeypatch, tmp_path
):
    """Checked, not made, before the bind: a folder it cannot write in (mode 555, a read-only
    mount; root writes through the mode, so access() is made to say no) is still refused at
    start, naming the folder, and nothing is made."""
    from distconv.sync.ps import cli

    directory = tmp_path / "new" / "parts"
    if there:
        directory.mkdir(parents=True)
    monkeypatch.setattr(cli.os, "access", lambda path, mode: False)
    with pytest.raises(cli.PserverStartError) as refused:
        cli._check_checkpoint_dir(str(directory))
    why = (
        "this process cannot write there"
        if there
        else f"cannot make it: this process cannot write in {tmp_path}"
    )
    assert str(refused.value) == f"--checkpoint-dir {directory}: {why}"
    assert (tmp_path / "new").exists() is there


@pytest.mark.timeout(60)
@pytest.mark.parametrize("at", ["last", "middle"])
def test_a_checkpoint_dir_with_a_name_too_long_is_refused_at_start(at, tmp_path):
    """A name too long passes the check of the nearest folder there (writable): made once bound,
    it failed then, and made at the first part, as now, it would fail only there, an epoch or
    hours in. Refused at start, naming the length, with nothing made."""
    long = "x" * 300
    levels = ("new", "sub", long) if at == "last" else ("new", long, "sub")
    directory = tmp_path.joinpath(*levels)
    done = _pserver("--checkpoint-dir", str(directory))
    assert done.returncode == 1, done
    most = os.pathconf(tmp_path, "PC_NAME_MAX")
    said = (
        f"cannot make it: file name too long (300 bytes in a name, where {tmp_path} takes {most})"
    )
    assert done.stderr.strip().splitlines()[-1].endswith(said), done.stderr
    assert not (tmp_path / "new").exists()
    assert "listening on" not in done.stderr + done.stdout


def test_folders_are_made_one_by_one_and_only_those_made_are_removed(monkeypatch, tmp_path):
    """make_folders takes a level another shard makes at the same moment as there, not its
    own, and on a failure removes only the folders it made that are still empty."""
    from pathlib import Path

    from distconv.sync.ps.parts import make_folders

    mkdir, too_long = Path.mkdir, "x" * 300
    theirs, filled = tmp_path / "a" / "theirs", tmp_path / "b" / "filled"

    def racing_mkdir(path: Path, *args, **kwargs) -> None:
        mkdir(path, *args, **kwargs)
        if path == theirs:  # another shard made it first
            raise FileExistsError(errno.EEXIST, "File exists", str(path))
        if path == filled:  # another shard wrote in it before the next level failed
            (path / "part").write_text("")

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    for made, kept in [(tmp_path / "c" / "d", None), (theirs, theirs), (filled, filled / "part")]:
        with pytest.raises(OSError) as failed:
            make_folders(made / too_long)
        assert failed.value.errno == errno.ENAMETOOLONG
        assert not os.path.lexists(made / too_long)
        if kept is None:
            assert not (tmp_path / "c").exists()  # all its own, all removed
        else:
            assert kept.exists()
    make_folders(tmp_path / "e" / "f")  # and one that can be made is
    assert (tmp_path / "e" / "f").is_dir()


def test_a_level_another_shard_made_and_removed_again_is_made_afresh(monkeypatch, tmp_path):
    """Shard B takes ``new`` as there, made by shard A at the same moment; A then fails (its
    own last name too long) and removes ``new``, its own, before B makes ``new/b``: B failed
    with ``No such file or directory``, a shard that os.makedirs would have started, and must
    start now, with its folder made."""
    from pathlib import Path

    from distconv.sync.ps.parts import make_folders

    mkdir, new = Path.mkdir, tmp_path / "new"
    raced: list[Path] = []

    def racing_mkdir(path: Path, *args, **kwargs) -> None:
        if path == new and not raced:  # shard A made it first...
            raced.append(path)
            mkdir(path)
            raise FileExistsError(errno.EEXIST, "File exists", str(path))
        if path.parent == new and os.path.isdir(new) and raced == [new]:
            raced.append(path)
            new.rmdir()  # ...and removed it again as it failed
        mkdir(path, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    make_folders(new / "b" / "parts")
    assert (new / "b" / "parts").is_dir()
    assert raced == [new, new / "b"]  # the race did happen


@pytest.mark.parametrize("delete", ["rename", "rmdir"])
def test_a_failed_make_leaves_the_folder_another_shard_made_again(tmp_path, monkeypatch, delete):
    """A level this shard made, deleted by a user and made again (empty) by another shard
    before this one fails, is the other shard's: the undo removed it by its path alone, and
    after an ``rmdir`` by its inode too, which ext4 gave the new folder."""
    from distconv.files import MadeFolder
    from distconv.sync.ps import parts

    top, deep = tmp_path / "job", tmp_path / "job" / "shard-0" / ("x" * 300)
    make = MadeFolder.make

    def user_and_other_shard(path):
        made = make(path)
        if path == top:  # the user deletes it, another shard makes it again, empty
            top.rename(tmp_path / "deleted") if delete == "rename" else top.rmdir()
            top.mkdir()
        return made

    monkeypatch.setattr(parts.MadeFolder, "make", staticmethod(user_and_other_shard))
    with pytest.raises(OSError) as failed:  # the last name is too long
        parts.make_folders(deep)
    assert failed.value.errno == errno.ENAMETOOLONG
    assert top.is_dir()  # the other shard's
    assert not (top / "shard-0").exists()  # this call's own, made in the other's, is undone
