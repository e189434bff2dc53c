"""``--init-from``'s source read twice (its weights, then its digest): a source run still
training that prunes the checkpoint between the two reads gets a refusal naming the file, and
nothing is loaded, not a FileNotFoundError's traceback over half-set weights."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import init_from
from distconv.checkpoint import CheckpointError, load_checkpoint
from distconv.models import lenet
from distconv.source_words import INIT_FROM_FLAG
from tests.test_init_from import first_run

pytestmark = pytest.mark.timeout(120)


def test_a_source_pruned_between_its_reads_is_refused_naming_it(tmp_path, monkeypatch):
    source = first_run(tmp_path / "a")

    def read_then_pruned(path, **kwargs):  # the source run's prune, at the worst moment
        ckpt = load_checkpoint(path, **kwargs)
        source.unlink()
        return ckpt

    monkeypatch.setattr(init_from, "load_checkpoint", read_then_pruned)
    params = lenet((1, 8, 8), 4).parameters()
    before = {p.name: np.array(p.value) for p in params}
    words = rf"--init-from {source}: cannot be read again .*\(it is gone: .*nothing was loaded"
    with pytest.raises(CheckpointError, match=words):
        init_from.load_weights(source, params, words=INIT_FROM_FLAG)
    assert all(np.array_equal(p.value, before[p.name]) for p in params)  # nothing loaded
