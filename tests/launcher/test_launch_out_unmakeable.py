"""``distconv-launch local --workers 2 --servers 1 -- --out F/r`` where ``F`` is a file: the
shard, which keeps its checkpoint parts in the workers' ``--out``, met it first and said
``[server 0] distconv pserver: error: --checkpoint-dir F/r: cannot make it``, a flag the user
never gave, then ``server 0 failed``. The launcher now refuses it before anything starts,
naming the ``--out`` after ``--``, in ``distconv train``'s own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip

#: the refusal's words (not imported: a test of them must not take them from the code)
NAMED = "error: --out after --: output directory '{out}' cannot be made: '{file}' is a file"
TRAIN = ("--data", "synthetic", "--epochs", "1", "--no-progress")


def _file_in_the_way(tmp_path: Path) -> tuple[Path, Path]:
    """A file, and an ``--out`` below it."""
    file = tmp_path / "afile"
    file.write_text("not a folder\n")
    return file, file / "r"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("servers", ["1", "0"])
def test_an_out_under_a_file_is_refused_before_any_shard_or_worker_starts(tmp_path, servers):
    file, out = _file_in_the_way(tmp_path)
    sizes = ("--workers", "2" if servers == "1" else "1", "--servers", servers)
    done = launch("local", *sizes, "--", *TRAIN, "--out", str(out), cwd=tmp_path, timeout=50)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()  # one line: nothing started to say more
    assert line.startswith("distconv-launch local: " + NAMED.format(out=out, file=file)), line
    assert "--checkpoint-dir" not in line and "server 0" not in line, line
    assert not (tmp_path / "runs").exists()  # no run directory made, no log written


@pytest.mark.timeout(60)
def test_an_out_that_is_a_file_itself_is_refused_in_trains_words(tmp_path):
    file, _ = _file_in_the_way(tmp_path)
    done = launch(
        "local", "--workers", "2", "--servers", "1", "--", *TRAIN, "--out=afile",
        cwd=tmp_path, timeout=50,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    said = "error: --out after --: output directory 'afile' exists and is not a directory"
    assert said in done.stderr, done.stderr
    assert file.read_text() == "not a folder\n"  # nothing lost


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_mpi_refuses_it_here_and_leaves_other_hosts_their_own_paths(tmp_path):
    mpiexec_or_skip()
    file, out = _file_in_the_way(tmp_path)
    here = launch("mpi", "-np", "2", "--dry-run", "--", "--out", str(out), cwd=tmp_path)
    assert (here.returncode, here.stdout) == (1, ""), here.stderr
    assert NAMED.format(out=out, file=file) in here.stderr, here.stderr
    # on other hosts the path is theirs: this host's file there says nothing of it
    elsewhere = ("mpi", "-np", "2", "-H", "a:1,b:1", "--dry-run", "--", "--out", str(out))
    there = launch(*elsewhere, cwd=tmp_path)
    assert there.returncode == 0, there.stderr
    assert there.stdout.rstrip().endswith(f"--out {out}"), there.stdout


@pytest.mark.timeout(60)
def test_an_out_this_process_cannot_write_in_is_refused_before_any_shard_starts(tmp_path):
    """``/proc/self`` takes no folder, for root too: the shard said ``--checkpoint-dir
    /proc/self/r: cannot make it: this process cannot write in /proc/self``, then ``server 0
    failed``."""
    done = launch(
        "local", "--workers", "2", "--servers", "1", "--", *TRAIN, "--out", "/proc/self/r",
        cwd=tmp_path, timeout=50,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    said = (
        "error: --out after --: output directory '/proc/self/r' cannot be made: this process "
        "cannot write in '/proc/self' (give another --out"
    )
    assert said in line and "--checkpoint-dir" not in line, line
    assert not (tmp_path / "runs").exists()


@pytest.mark.timeout(60)
def test_an_out_with_a_name_too_long_is_refused_before_any_shard_starts(tmp_path):
    """A name longer than its file system takes passed the launcher's check, which asked only
    the nearest folder there (writable): the shard met it first, ``[server 0] distconv pserver:
    error: --checkpoint-dir .../x: cannot make it: file name too long``, then ``server 0
    failed``. The launcher asks what a shard asks of its ``--checkpoint-dir``."""
    out = tmp_path / ("a" * 300) / "x"
    done = launch(
        "local", "--workers", "1", "--servers", "1", "--", *TRAIN, "--out", str(out),
        cwd=tmp_path, timeout=50,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    said = (
        f"error: --out after --: output directory '{out}' cannot be made: file name too long "
        f"(300 bytes in a name, where '{tmp_path}' takes "
    )
    assert said in line and "--checkpoint-dir" not in line, line
    assert not (tmp_path / "runs").exists()
