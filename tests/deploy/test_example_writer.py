"""``python -m distconv.deploy FOLDER``: a FOLDER that cannot hold the examples is named in one
line, never a traceback, and a blank one is no folder: it wrote every example into the working
directory."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distconv import files
from distconv.deploy import render_manifests, write_manifests
from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)


def _write(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "distconv.deploy", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("args, status", [(["--help"], 0), (["-h"], 0), (["--out"], 2)])
def test_an_option_to_the_example_writer_is_no_folder(tmp_path, args, status):
    """`python -m distconv.deploy --help` wrote the examples into a folder named --help."""
    result = _write(tmp_path, *args)
    assert result.returncode == status, result.stderr
    assert "usage: python -m distconv.deploy" in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_folder_is_a_usage_error_not_the_working_directory(tmp_path, blank):
    """``python -m distconv.deploy "$OUT"`` with OUT unset wrote pserver/, mpijob/, ... into
    the working directory and said nothing."""
    result = _write(tmp_path, blank)
    assert result.returncode == 2, result.stderr
    assert "FOLDER must not be empty" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "make, target, status, words",
    [
        (lambda d: (d / "f").write_text(""), "f", 2, "f is a file, not a folder"),
        (lambda d: (d / "f").write_text(""), "f/k8s", 2, "f is a file, not a folder"),
        (lambda d: (d / "l").symlink_to(d / "gone"), "l", 2, "is a symlink to"),
        (
            lambda d: (
                (d / "k8s" / "pserver").mkdir(parents=True)
                or (d / "k8s" / "pserver" / "other.yaml").write_text("kind: Pod\n")
            ),
            "k8s",
            1,
            "holds manifests this job does not have (other.yaml)",
        ),
    ],
)
def test_a_folder_that_cannot_hold_the_examples_is_named_in_one_line(
    tmp_path, make, target, status, words
):
    """A file or a link to nowhere on the way ended in a traceback ('[Errno 20] Not a
    directory', '[Errno 17] File exists'), and so did another job's manifests in the folder."""
    make(tmp_path)
    result = _write(tmp_path, target)
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if not x.startswith("usage:")]
    assert line.startswith("python -m distconv.deploy: error: ") and words in line, line
    assert result.stdout == ""


#: renders one job into argv[1], under a file-size limit where argv[2] says so
_WRITER = """
import resource, signal, sys
from distconv.deploy import render_manifests, write_manifests
objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
if len(sys.argv) > 2:  # a full disk, cut short at 1000 bytes: EFBIG, not a signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
try:
    write_manifests(objs, sys.argv[1])
except OSError as exc:
    sys.exit(str(exc))
"""


def test_a_manifest_rewritten_on_a_full_disk_is_left_whole(tmp_path):
    """A render over an earlier one that failed mid-file (disk full) left the StatefulSet cut
    at 1000 bytes, a file `kubectl apply -f` may still parse (cut at a line, it is valid YAML
    missing the rest of the pod); each file is now replaced whole or left as it was."""

    def render(*limit: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", _WRITER, str(tmp_path), *limit],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    assert render().returncode == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    failed = render("limit")
    assert failed.returncode == 1 and "File too large" in failed.stderr, failed.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary left


def test_a_render_the_disk_cuts_off_leaves_the_earlier_one_whole(tmp_path, monkeypatch):
    """A render for 3 workers over one for 2, the disk full at its Job, left the new
    StatefulSet (--workers 3) beside the old Job (2 ranks): valid files `kubectl apply -f`
    would take, whose shards wait for ever for a third rank. Now none is replaced."""
    write_manifests(render_manifests(job_name="j", workers=2, servers=1, image="d:1"), tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def disk_full(path: Path) -> None:
        if "job-j-worker.yaml" in path.name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files, "write_hook", disk_full)
    three = render_manifests(job_name="j", workers=3, servers=1, image="d:1")
    with pytest.raises(OSError, match="No space left on device"):
        write_manifests(three, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing staged left
    monkeypatch.setattr(files, "write_hook", None)
    assert sorted(p.name for p in write_manifests(three, tmp_path)) == sorted(before)
    statefulset = (tmp_path / "statefulset-j-pserver.yaml").read_text()
    assert '"--workers"\n            - "3"' in statefulset


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda k: (k / "mpijob").write_text(""), "k8s/mpijob is a file, not a folder"),
        (lambda k: (k / "pserver").symlink_to(k / "gone"), "k8s/pserver is a symlink to"),
    ],
)
def test_an_examples_folder_in_the_way_is_named_before_anything_is_written(tmp_path, make, words):
    """FOLDER/mpijob a file, or FOLDER/pserver a link to nowhere, ended in '[Errno 17] File
    exists', and the examples before it in FOLDER were written already."""
    (tmp_path / "k8s").mkdir()
    make(tmp_path / "k8s")
    before = sorted((tmp_path / "k8s").iterdir())
    result = _write(tmp_path, "k8s")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("python -m distconv.deploy: error: ") and words in line, line
    assert "Errno" not in line and result.stdout == ""
    assert sorted((tmp_path / "k8s").iterdir()) == before  # nothing written


def test_other_manifests_in_a_later_examples_folder_leave_all_unwritten(tmp_path):
    """Another job's manifests in FOLDER/mpijob were refused only after pserver/ and
    pserver-gpu/ had been written: the run failed, half of FOLDER rewritten."""
    (tmp_path / "k8s" / "mpijob").mkdir(parents=True)
    (tmp_path / "k8s" / "mpijob" / "other.yaml").write_text("kind: Pod\n")
    result = _write(tmp_path, "k8s")
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert "k8s/mpijob holds manifests this job does not have (other.yaml)" in line, line
    assert [p.name for p in (tmp_path / "k8s").iterdir()] == ["mpijob"]  # nothing written


def _closed_pipe() -> int:
    """The write end of a pipe whose reader is gone (``| head -0``): every write is EPIPE."""
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.mark.parametrize(
    "args, words",
    [
        (["--help"], "cannot write the usage to stdout"),
        (["k8s"], "cannot write the list of files written to stdout"),
    ],
)
@pytest.mark.parametrize("stdout", ["/dev/full", "closed pipe"])
def test_a_stdout_that_cannot_take_the_output_is_one_error_line(tmp_path, args, words, stdout):
    """`python -m distconv.deploy | head -0` (or > /dev/full) ended in print()'s traceback."""
    fd = os.open(stdout, os.O_WRONLY) if stdout == "/dev/full" else _closed_pipe()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "distconv.deploy", *args],
            cwd=tmp_path,
            env=child_env(),
            stdout=fd,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(fd)
    cause = "no space left on device" if stdout == "/dev/full" else "broken pipe"
    assert result.returncode == 1
    assert result.stderr == f"python -m distconv.deploy: error: {words}: {cause}\n"
    if args == ["k8s"]:  # written before they were listed
        assert (tmp_path / "k8s" / "mpijob" / "mpijob-digits-mpi.yaml").is_file()


def test_a_folder_name_stdout_cannot_encode_is_one_error_line(tmp_path):
    """``python -m distconv.deploy outé`` under ``PYTHONIOENCODING=ascii`` wrote the examples,
    then ended in UnicodeEncodeError's traceback listing them."""
    result = subprocess.run(
        [sys.executable, "-m", "distconv.deploy", "outé"],
        cwd=tmp_path,
        env=child_env(PYTHONIOENCODING="ascii"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    said = "cannot write the list of files written to stdout: its encoding ascii cannot hold"
    assert result.stderr == f"python -m distconv.deploy: error: {said} '\\xe9'\n"
    assert (tmp_path / "outé" / "mpijob" / "mpijob-digits-mpi.yaml").is_file()


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (hidden ones too), a file's bytes, a folder's None."""
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in root.rglob("*")
    }


def test_a_folder_where_a_manifest_goes_is_named_before_anything_is_written(tmp_path):
    """A folder named statefulset-j-pserver.yaml failed at its rename, after the Service was
    replaced: the new Service beside the old Job, and the Job's staged .job-j-worker.yaml.new
    left behind, with '[Errno 21] Is a directory' naming the staged file."""
    write_manifests(render_manifests(job_name="j", workers=2, servers=1, image="d:1"), tmp_path)
    (tmp_path / "statefulset-j-pserver.yaml").unlink()
    (tmp_path / "statefulset-j-pserver.yaml").mkdir()
    before = _tree(tmp_path)
    three = render_manifests(job_name="j", workers=3, servers=1, image="d:1")
    with pytest.raises(ValueError) as caught:
        write_manifests(three, tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}/statefulset-j-pserver.yaml is not a file: the manifest cannot be written there"
    )
    assert _tree(tmp_path) == before


def test_a_folder_where_an_example_goes_leaves_all_unwritten(tmp_path):
    """The examples' write failed at FOLDER/mpijob-gpu, a folder standing where its manifest
    goes, after the other examples had been written."""
    (tmp_path / "k8s" / "mpijob-gpu" / "mpijob-digits-mpi-gpu.yaml").mkdir(parents=True)
    before = _tree(tmp_path)
    result = _write(tmp_path, "k8s")
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        "python -m distconv.deploy: error: k8s/mpijob-gpu/mpijob-digits-mpi-gpu.yaml is not a "
        "file: the manifest cannot be written there\n"
    )
    assert _tree(tmp_path) == before and result.stdout == ""
