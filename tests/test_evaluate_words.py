"""How ``distconv evaluate --from PATH`` reads its checkpoint: once, so a run still training
that prunes it meanwhile does not fail the evaluation, and in its own words
(:data:`distconv.source_words.EVALUATE_FROM`), as ``--init-from`` reads in its: a damaged file
and a parameter-server shard's part under another name name ``--from`` and a way out a
command-line user can take, not restore_checkpoint's advice to call a script's function."""

from __future__ import annotations

import shutil

import pytest

from distconv import init_from
from distconv.checkpoint import load_checkpoint
from distconv.checkpoint_file_kinds import SHARD_PART_IS
from distconv.evaluate_cmd import evaluate_checkpoint
from tests.launcher.conftest import own_home  # noqa: F401  (its launches' HOME: their own)
from tests.test_evaluate_cmd import refused, trained
from tests.test_restore_checkpoint_paths import shard_part  # noqa: F401  (a real shard's part)

pytestmark = pytest.mark.timeout(180)

ERROR = "distconv evaluate: error: "


def test_a_damaged_file_is_named_by_from_with_the_way_out(tmp_path):
    damaged = tmp_path / "weights.safetensors"
    damaged.write_text("not a checkpoint")
    said = refused(damaged, cwd=tmp_path)
    assert said.startswith(f"{ERROR}--from {damaged}: its checkpoint is damaged ("), said
    assert said.endswith("; pass another: an older checkpoints/step-N folder, or another file")


def test_a_renamed_shard_part_is_named_as_one_named_so_is(shard_part, tmp_path):  # noqa: F811
    """Told by its metadata, it was refused in restore_checkpoint's words, which advise a
    script's ``load_weights(path, params)`` and name no ``--from``."""
    renamed = tmp_path / "weights.safetensors"
    shutil.copyfile(shard_part, renamed)
    for part in (shard_part, renamed):
        assert refused(part, cwd=tmp_path) == (
            f"{ERROR}--from {part}: {SHARD_PART_IS}; pass its run's --out or one of its "
            "checkpoints/step-N folders, whose chief's part holds every weight"
        )


def test_a_checkpoint_pruned_once_read_is_evaluated(tmp_path, monkeypatch):
    """The weights were read a second time, after the model was built: a run that pruned the
    step meanwhile (``--keep-checkpoints 1`` prunes its newest at each save) failed it with
    '--from FILE: no such file or folder', of a file it had just read."""
    out = tmp_path / "run"
    line = trained(out)

    def read_then_pruned(path, **kwargs):  # the run's prune, at the worst moment
        ckpt = load_checkpoint(path, **kwargs)
        shutil.rmtree(path.parent)
        return ckpt

    monkeypatch.setattr(init_from, "load_checkpoint", read_then_pruned)
    assert evaluate_checkpoint(str(out)).metrics["test_acc"] == line["test_acc"]
