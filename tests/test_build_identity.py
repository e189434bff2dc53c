"""``distconv.build_id()``: the release and a digest of the source, alike in every process that
runs the same source (wherever it lies), unlike where one file differs, a comment included;
``distconv --version`` prints it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import distconv
from distconv.build_identity import build_digest, digest_bits
from tests.child_env import child_env, child_path
from tests.source_copy import copy_source, edit

SAY = "import distconv; print(distconv.build_id())"


def build_of(first: Path | None = None) -> str:
    """The build id a fresh process reports, ``first`` (a source copy) before this checkout
    (run in ``first``'s parent: ``-c`` puts the working directory before ``PYTHONPATH``)."""
    env = child_env(PYTHONPATH=child_path(first) if first else child_path())
    where = first.parent if first else None
    run = [sys.executable, "-c", SAY]
    proc = subprocess.run(run, env=env, capture_output=True, text=True, cwd=where)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_id_is_the_release_and_the_digest_alike_in_another_process():
    ours = distconv.build_id()
    release, digest = ours.split("+")
    assert release == distconv.__version__
    assert digest == build_digest()[:16] and len(build_digest()) == 64
    int(digest, 16)  # hex
    assert digest_bits() == int.from_bytes(bytes.fromhex(digest), "big", signed=True)
    assert -(2**63) <= digest_bits() < 2**63
    assert build_of() == ours


def test_a_copy_elsewhere_is_the_same_build_and_one_edited_comment_another(tmp_path):
    same = copy_source(tmp_path / "same")
    assert build_of(same) == distconv.build_id()  # the folder it lies in is no part of it
    package = copy_source(tmp_path / "package")
    edit(package, "distconv/optim.py", "one update rule each", "one update rule each (edited)")
    launcher = copy_source(tmp_path / "launcher")
    edit(launcher, "launcher/cli.py", "``local``, ``mpi``", "``local`` (edited), ``mpi``")
    ids = {distconv.build_id(), build_of(package), build_of(launcher)}
    assert len(ids) == 3, ids
    # the copy was imported, not this checkout (else the first check above proved nothing)
    code = "import distconv; print(distconv.__file__)"
    env = child_env(PYTHONPATH=child_path(same))
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert run.stdout.startswith(str(same)), run
    assert {i.split("+")[0] for i in ids} == {distconv.__version__}


def test_version_flag_prints_the_build():
    proc = subprocess.run(
        [sys.executable, "-m", "distconv", "--version"],
        env=child_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"distconv {distconv.build_id()}\n"


def test_what_an_editor_or_a_notebook_leaves_beside_the_source_is_no_part_of_it(tmp_path):
    """An Emacs lock file (a link to nowhere while a buffer is modified), a Jupyter copy and a
    file manager's copy: none is importable code, and the build is the clean copy's, where the
    lock file failed ``--version``, MPI's setup and the pserver hello on reading it."""
    copy = copy_source(tmp_path / "copy")
    (copy / "distconv" / ".#optim.py").symlink_to("researcher@node7.4242:1765000000")
    notebook = copy / "distconv" / ".ipynb_checkpoints"
    notebook.mkdir()
    (notebook / "optim-checkpoint.py").write_text("# an older optim.py\n")
    (copy / "launcher" / "cli (copy).py").write_text("# a copy of cli.py\n")
    proc = subprocess.run(
        [sys.executable, "-m", "distconv", "--version"],
        env=child_env(PYTHONPATH=child_path(copy)),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"distconv {distconv.build_id()}\n"


def test_an_install_zipped_is_the_same_build(tmp_path):
    """The installed layout (the launcher as ``distconv/launch``, as the wheel maps it) in a
    zip file on the path, as a zipapp holds it: the same source, the same build, where the
    digest read no file of the zip and every zipped build said the digest of nothing."""
    copy = copy_source(tmp_path / "copy")
    shutil.move(copy / "launcher", copy / "distconv" / "launch")
    archive = tmp_path / "distconv.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted((copy / "distconv").rglob("*")):
            zipped.write(path, path.relative_to(copy).as_posix())
    proc = subprocess.run(
        [sys.executable, "-c", "import distconv; print(distconv.__file__, distconv.build_id())"],
        env=child_env(PYTHONPATH=child_path(archive)),
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{archive / 'distconv' / '__init__.py'} {distconv.build_id()}\n"
