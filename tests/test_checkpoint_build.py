"""A checkpoint records the distconv that wrote it (:func:`distconv.build_id`): the chief's part
in its metadata, the step manifest beside its job and launch. A resume of another build's
checkpoint says so once, as information (an upgrade is the normal way to resume one); a file
of a format version this distconv cannot read names the build to resume it with. A checkpoint
without the field (a distconv before it, here this one's with the field removed) still resumes
and loads. Real runs and files; another build is a file whose field is rewritten, its checksum
made anew, since one process runs one build."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

import distconv
from distconv.checkpoint import (
    BUILD_KEY,
    DIGEST_KEY,
    CheckpointVersionError,
    load_checkpoint,
    save_tensors,
)
from distconv.run_dir import RunDirectory
from tests.child_env import child_env, child_path
from tests.source_copy import copy_source
from tests.test_resume_model_structure import DATA, _trainer

pytestmark = pytest.mark.timeout(60)

OTHER = "0.1.0+abcd0123abcd0123"


def _rewrite_metadata(path, **changes) -> None:
    """Rewrite a checkpoint's metadata with ``changes`` (None: the entry removed), its tensors
    as they are and a checksum of the new content: a whole file, as another build wrote it."""
    with safe_open(path, "np") as f:
        meta = {**f.metadata(), **changes}
    meta = {k: v for k, v in meta.items() if v is not None and k != DIGEST_KEY}
    save_tensors(path, load_file(path), meta)


def _first_run(tmp_path):
    """A one-epoch run in ``tmp_path / "run"``; its directory and newest manifest."""
    out = tmp_path / "run"
    _trainer(out).fit(DATA, epochs=1)
    return out, RunDirectory(out).latest()


def _resume_said(out, caplog, epochs: int = 2) -> list[tuple[str, str]]:
    """Resume ``out`` up to ``epochs``; what ``distconv.resume`` said of builds, at any level."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="distconv.resume"):
        records = _trainer(out).fit(DATA, epochs=epochs, resume=True)
    assert [r["epoch"] for r in records] == [epochs]  # resumed, not refused
    return [(r.levelname, r.getMessage()) for r in caplog.records if "written by" in r.message]


def test_the_chief_part_and_the_manifest_record_the_build_that_wrote_them(tmp_path):
    _, manifest = _first_run(tmp_path)
    assert load_checkpoint(manifest.part("chief")).build == distconv.build_id()
    assert json.loads(manifest.path.read_text())["build"] == distconv.build_id()
    assert manifest.build == distconv.build_id()  # as read back


def test_a_resume_of_another_builds_checkpoint_says_so_once_as_information(tmp_path, caplog):
    """The checkpoint that resume writes is this build's: its resume says nothing of builds."""
    out, manifest = _first_run(tmp_path)
    _rewrite_metadata(manifest.part("chief"), **{BUILD_KEY: OTHER})
    said = f"{manifest.part('chief')} was written by distconv {OTHER}; this is distconv "
    assert _resume_said(out, caplog) == [("INFO", said + distconv.build_id())]
    assert _resume_said(out, caplog, 3) == []


def test_a_checkpoint_that_records_no_build_resumes_and_says_so(tmp_path, caplog):
    """This distconv's checkpoint with the field removed, in the part and in the manifest."""
    out, manifest = _first_run(tmp_path)
    _rewrite_metadata(manifest.part("chief"), **{BUILD_KEY: None})
    manifest.path.write_text(
        json.dumps({k: v for k, v in json.loads(manifest.path.read_text()).items() if k != "build"})
    )
    assert RunDirectory(out).latest().build is None
    ckpt = load_checkpoint(manifest.part("chief"))
    assert ckpt.build is None and ckpt.step == manifest.step == 4
    path = manifest.part("chief")
    said = f"{path} was written by a distconv that records none; this is distconv "
    assert _resume_said(out, caplog) == [("INFO", said + distconv.build_id())]


@pytest.mark.parametrize("build", [OTHER, None])
def test_a_file_of_another_format_version_names_the_build_to_resume_it_with(tmp_path, build):
    _, manifest = _first_run(tmp_path)
    path = manifest.part("chief")
    _rewrite_metadata(path, version="3", **{BUILD_KEY: build})
    with pytest.raises(CheckpointVersionError) as refused:
        load_checkpoint(path)
    said = f"checkpoint {path} has format version '3'; this distconv reads version '2': "
    ours = distconv.build_id()
    named = f"written by distconv {OTHER}; this is {ours}: resume with that build"
    assert str(refused.value) == said + (
        named if build else "resume with the distconv that wrote it"
    )


#: a child run from a source copy: its trainer made, then that copy edited on disk (an upgrade
#: in place while the job runs), then its first epoch and checkpoint; the builds they record
EDITED_WHILE_RUNNING = """
import sys
from pathlib import Path
import distconv
from distconv.checkpoint import load_checkpoint
from distconv.run_dir import RunDirectory
from tests.test_resume_model_structure import DATA, _trainer
trainer = _trainer(sys.argv[1])
optim = Path(distconv.__file__).parent / "optim.py"
optim.write_text(optim.read_text() + "# edited on disk while the run went on\\n")
trainer.fit(DATA, epochs=1)
manifest = RunDirectory(sys.argv[1]).latest()
print(load_checkpoint(manifest.part("chief")).build, manifest.build)
"""


def test_a_checkpoint_records_the_build_the_run_started_with_not_one_edited_in_since(tmp_path):
    """A single-process run (no MPI or parameter-server start-up computes the build): a source
    file changed on disk after its start, before its first checkpoint, is not the code that
    wrote it."""
    copy = copy_source(tmp_path / "copy")  # this checkout's build, until the child edits it
    env = child_env(PYTHONPATH=child_path(copy))
    argv = [sys.executable, "-c", EDITED_WHILE_RUNNING, str(tmp_path / "run")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=50)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [distconv.build_id()] * 2
