"""A resume compares the network's structure (each layer's type, inputs and settings) with the
checkpoint's: a model whose activation or wiring changed on the same parameter shapes resumed
silently as another model on the old weights. A checkpoint of an older distconv (no
structure recorded), or of one whose layers record other settings, resumes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.checkpoint import CheckpointError, load_checkpoint
from distconv.init import set_seed
from distconv.layers import FullMatrixProjection, FullyConnected, Mixed, MSELoss
from distconv.optim import create_optimizer
from distconv.resume_facts import FACTS_FORM_KEY, FACTS_FORMS
from distconv.sync.local import LocalSync
from tests.child_env import child_env
from tests.test_resume_checks import _rewrite_extra

pytestmark = pytest.mark.timeout(60)

RNG = np.random.default_rng(5)
#: 64 examples in batches of 16: four steps an epoch; inputs of one width, so a swap keeps shapes
DATA = {
    "a": RNG.standard_normal((64, 4)).astype(np.float32),
    "b": RNG.standard_normal((64, 4)).astype(np.float32),
    "target": RNG.standard_normal((64, 1)).astype(np.float32),
}


def _net(act: str = "tanh", inputs: tuple[str, str] = ("a", "b"), loss: str = "loss") -> Network:
    """``mix = act(A a + B b + c)``, ``out = W mix + d``: the same parameters for any ``act``;
    the loss layer named ``loss``."""
    set_seed(0)
    net = Network()
    mix = Mixed([FullMatrixProjection(4, 8), FullMatrixProjection(4, 8)], bias=True, act=act)
    net.add("mix", mix, list(inputs))
    net.add("out", FullyConnected(8, 1), "mix")
    net.add(loss, MSELoss(), ["out", "target"])
    return net


def _trainer(out, net: Network | None = None, **kw) -> Trainer:
    sync = LocalSync(create_optimizer("adam", lr=0.01))
    return Trainer(net or _net(), sync, 16, out_dir=out, progress=False, **kw)


def _weights(trainer: Trainer) -> dict[str, np.ndarray]:
    return {p.name: p.value.copy() for p in trainer.params}


def _latest_extra(trainer: Trainer) -> dict:
    return load_checkpoint(trainer.checkpoints.run.latest().part("chief")).extra


def test_another_activation_or_wiring_is_refused_and_the_same_model_resumes(tmp_path):
    out = tmp_path / "run"
    first = _trainer(out)
    first.fit(DATA, epochs=1)
    assert _latest_extra(first)["layers"]["mix"]["act"] == "Tanh"
    relu = _trainer(out, _net("relu"))
    before = _weights(relu)
    said = r"\(layers\.mix\.act: checkpoint 'Tanh', this run 'ReLU'\)"
    with pytest.raises(CheckpointError, match=said) as refused:
        relu.fit(DATA, epochs=2, resume=True)
    # how to go on: the checkpoint's model, or this one in another directory
    assert "build the model as the checkpoint's" in str(refused.value)
    assert "another output directory (out_dir, --out)" in str(refused.value)
    assert all(np.array_equal(before[k], v) for k, v in _weights(relu).items())  # not restored
    swapped = _trainer(out, _net(inputs=("b", "a")))
    said = r"layers\.mix\.inputs: checkpoint \['a', 'b'\], this run \['b', 'a'\]"
    with pytest.raises(CheckpointError, match=said):
        swapped.fit(DATA, epochs=2, resume=True)
    again = _trainer(out)
    assert [r["epoch"] for r in again.fit(DATA, epochs=2, resume=True)] == [2]
    whole = _trainer(tmp_path / "whole")  # the resumed run is the uninterrupted one
    whole.fit(DATA, epochs=2)
    assert all(np.array_equal(_weights(whole)[k], v) for k, v in _weights(again).items())


def test_a_checkpoint_without_the_structure_resumes_as_before(tmp_path):
    """Written before the structure was recorded (the form before it), also where its config
    had a ``layers`` key of its own (a script's ``--layers`` flag), kept under that name."""
    out = tmp_path / "run"
    first = _trainer(out)
    first.fit(DATA, epochs=1)
    older = {FACTS_FORM_KEY: FACTS_FORMS[0]}
    _rewrite_extra(first.checkpoints.run.latest(), layers=None, **older)
    assert [r["epoch"] for r in _trainer(out, _net("relu")).fit(DATA, epochs=2, resume=True)] == [2]
    widths = {"mix": 8, "out": 1}  # its config's "layers" (a mapping, as a structure is)
    _rewrite_extra(first.checkpoints.run.latest(), layers=widths, world_size=4, **older)
    relu = _trainer(out, _net("relu"), config={"layers": widths})
    latest = first.checkpoints.run.latest().part("chief")
    assert relu.checkpoints.restore(latest)[1].world_size is None  # its config's, not the fact
    assert [r["epoch"] for r in relu.fit(DATA, epochs=3, resume=True)] == [3]
    assert _latest_extra(relu)["config layers"] == widths  # kept beside the structure now
    assert (
        _trainer(out).checkpoints.restore(relu.checkpoints.run.latest().part("chief"))[1].world_size
        == 1
    )  # this form's: the fact


def test_settings_one_side_records_and_the_other_does_not_are_not_compared(tmp_path):
    """A later distconv whose layers record one setting more (or one fewer) resumes this one's
    checkpoint: only what both record is compared; a setting both hold still is."""
    out = tmp_path / "run"
    first = _trainer(out)
    first.fit(DATA, epochs=1)
    layers = _latest_extra(first)["layers"]
    mix = dict(layers["mix"], clip={"max": 5.0})  # a setting this distconv does not record
    mix["projections"] = [dict(p, scale=1.0) for p in mix["projections"]]
    del layers["out"]["act"]  # and one this distconv records, which that one does not
    _rewrite_extra(first.checkpoints.run.latest(), layers={**layers, "mix": mix})
    assert [r["epoch"] for r in _trainer(out).fit(DATA, epochs=2, resume=True)] == [2]
    with pytest.raises(CheckpointError, match=r"layers\.mix\.act: checkpoint 'Tanh'"):
        _trainer(out, _net("relu")).fit(DATA, epochs=3, resume=True)


def test_a_layer_renamed_and_the_same_resumes(tmp_path):
    """The loss layer (no parameters) renamed: the same model, which resumed as another (one
    layer gone, one new); renamed with another activation beside it, it is still refused."""
    out = tmp_path / "run"
    _trainer(out).fit(DATA, epochs=1)
    renamed = _trainer(out, _net(loss="mse"), loss="mse")
    assert [r["epoch"] for r in renamed.fit(DATA, epochs=2, resume=True)] == [2]
    assert set(_latest_extra(renamed)["layers"]) == {"mix", "out", "mse"}
    relu = _trainer(out, _net("relu", loss="cost"), loss="cost")
    with pytest.raises(CheckpointError, match=r"\(layers\.cost: checkpoint '<missing>'"):
        relu.fit(DATA, epochs=3, resume=True)


#: a script whose layer holds a lambda (written with its first line: a lambda is not the only
#: one of its name in its module), ``PAD`` blank lines above it; argv: out, epochs
SCRIPT = """import sys
from dataclasses import dataclass
from typing import Any
{pad}
import numpy as np

from distconv import Network, Trainer
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync


@dataclass(frozen=True)
class Recipe:
    post: Any


class Kept(FullyConnected):
    def __init__(self, *args, recipe, **kwargs):
        super().__init__(*args, **kwargs)
        self.recipe = recipe


set_seed(0)
net = Network()
net.add("fc", Kept(4, 8, act="tanh", recipe=Recipe(lambda v, k={k}: v * k)), "x")
net.add("out", FullyConnected(8, 1), "fc")
net.add("loss", MSELoss(), ["out", "y"])
rng = np.random.default_rng(0)
data = {{"x": rng.standard_normal((64, 4)), "y": rng.standard_normal((64, 1))}}
sync = LocalSync(create_optimizer("adam", lr=0.01))
trainer = Trainer(net, sync, 16, out_dir=sys.argv[1], progress=False)
print([r["epoch"] for r in trainer.fit(data, epochs=int(sys.argv[2]), resume="auto")])
"""


def _run_script(tmp_path, pad: int, k: int, epochs: int) -> subprocess.CompletedProcess:
    script = tmp_path / "model.py"
    script.write_text(SCRIPT.format(pad="\n" * pad, k=k))
    argv = [sys.executable, str(script), str(tmp_path / "run"), str(epochs)]
    return subprocess.run(argv, env=child_env(), capture_output=True, text=True, timeout=50)


def test_a_function_setting_moved_by_an_edit_above_it_resumes(tmp_path):
    """A lambda in a layer's setting is written with its first line; a script edited above it
    (two lines more) is the same model, and resumes; a default it holds changed is still
    another model, and refused."""
    assert _run_script(tmp_path, 0, 2, 1).stdout.strip() == "[1]"
    moved = _run_script(tmp_path, 2, 2, 2)
    assert moved.returncode == 0 and moved.stdout.strip() == "[2]", moved.stderr[-600:]
    other = _run_script(tmp_path, 2, 3, 3)
    assert other.returncode == 1
    assert "layers.fc.recipe.post.fields.defaults.k: checkpoint 2, this run 3" in other.stderr
