"""A failure report the disk cannot take names ``failure.json``: the report's line named the
temporary file it is written through (``failure.json.tmp``), removed again, which no doc names
and no operator finds (review of a walk on full disks). A file-size limit makes the write fail
for real, in a process of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_env
from tests.mounts import READ_ONLY, needs_mounts

WRITE = """\
import resource, signal, sys
from pathlib import Path
from launcher.failure import Failure, write_report

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
failure = Failure(role="worker", rank=0, exit_code=3, signal=None, log="w.log", tail=["boom"],
                  restart=0)
said, written = write_report(Path(sys.argv[1]), failure, 0, None)
print(said)
print(written)
"""


@pytest.mark.timeout(30)
def test_a_report_the_disk_cannot_take_names_failure_json(tmp_path: Path):
    path = tmp_path / "failure.json"
    done = subprocess.run(
        [sys.executable, "-c", WRITE, str(path)], capture_output=True, text=True,
        env=child_env(), timeout=20,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said, written = done.stdout.splitlines()
    assert said == f"report not written: '{path}': file too large", said
    assert written == "None"
    assert list(tmp_path.iterdir()) == []  # nothing half-written left


REPORT = """\
import sys
from pathlib import Path
from launcher.failure import Failure, write_report

failure = Failure(role="worker", rank=0, exit_code=3, signal=None, log="w.log", tail=["boom"],
                  restart=0)
print(write_report(Path(sys.argv[1]), failure, 0, None)[0])
"""


@needs_mounts
@pytest.mark.timeout(30)
def test_a_report_on_a_read_only_disk_names_failure_json_beside_a_stale_temporary_file(
    tmp_path: Path,
):
    """A ``failure.json.tmp`` an earlier launcher left (killed between its write and its
    rename), on a disk now read-only: that file, which cannot be removed, was named as if it
    were what stood in the way, where the report is what the disk cannot take."""
    (tmp_path / "failure.json.tmp").write_text('{"half')
    path = tmp_path / "failure.json"
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", READ_ONLY, str(tmp_path), sys.executable, "-c", REPORT,
         str(path)],
        capture_output=True, text=True, env=child_env(), timeout=20,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"report not written: '{path}': read-only file system\n", done
