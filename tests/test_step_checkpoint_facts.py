"""The run's facts a step checkpoint records (``StepCheckpoints``): written once a fit, not at
each save. A sparse tensor in the config was coalesced and hashed anew at every checkpoint
(about a second at 5M entries); a config changed between fits is still saved and compared as
it is then."""

from __future__ import annotations

import pytest

import distconv.plain_json as plain_json
from distconv.checkpoint import CheckpointError, load_checkpoint
from distconv.resume import Position
from tests.test_step_checkpoints import _checkpoints

pytestmark = pytest.mark.timeout(60)


class _Counted:
    """A config value of a text of its own that counts how often it is written."""

    written = 0

    def __str__(self) -> str:
        type(self).written += 1
        return "counted"


def _extra(ckpts):
    return load_checkpoint(ckpts.run.latest().part("chief")).extra


def test_a_config_value_is_written_once_a_fit_not_at_each_save(tmp_path, monkeypatch):
    monkeypatch.setattr(_Counted, "written", 0)
    ckpts = _checkpoints(tmp_path, facts={"seed": 0, "model": {"aug": _Counted()}})
    opened = _Counted.written  # refused at construction if unsavable, then the fit's facts
    for step in (1, 2, 3):
        ckpts.save(Position(0, step, step), {})
    assert _Counted.written == opened
    assert _extra(ckpts)["model"] == {"aug": "counted"}
    ckpts.close()


def test_a_sparse_tensor_in_the_config_is_coalesced_once_a_fit(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    calls = []
    coo_entries = plain_json.coo_entries
    monkeypatch.setattr(plain_json, "coo_entries", lambda t: calls.append(t) or coo_entries(t))
    mask = torch.sparse_coo_tensor(torch.tensor([[2, 0, 2]]), torch.tensor([1.0, 2.0, 3.0]), (4,))
    ckpts = _checkpoints(tmp_path, facts={"seed": 0, "mask": mask})
    opened = len(calls)
    for step in (1, 2, 3):
        ckpts.save(Position(0, step, step), {})
    assert len(calls) == opened
    assert _extra(ckpts)["mask"] == plain_json.plain(mask)  # as written before: its hashes
    ckpts.close()


def test_a_config_changed_between_fits_is_compared_and_saved_as_it_is_then(tmp_path):
    """Each fit (``open``) writes the facts anew: a cache kept for the Trainer's life compared
    the config's old value with the checkpoint's and let another run resume it."""
    model = ["conv"]
    ckpts = _checkpoints(tmp_path, facts={"seed": 0, "model": model})
    ckpts.save(Position(0, 1, 1), {})
    ckpts.close()
    model.append("fc")  # the next fit's model
    with pytest.raises(
        CheckpointError, match=r"model: checkpoint \['conv'\], this run \['conv', 'fc'\]"
    ):
        ckpts.open(True)
    ckpts.close()
    ckpts.open("overwrite")
    ckpts.save(Position(0, 1, 1), {})
    assert _extra(ckpts)["model"] == ["conv", "fc"]
    ckpts.close()
