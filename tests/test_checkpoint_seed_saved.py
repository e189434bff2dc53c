"""save_checkpoint refuses a seed that is no integer, naming it: it kept ``int(seed)``, so 2.5
was saved as 2 and True as 1 (a resume then compared that with the run's seed), and NaN raised
a bare ValueError naming neither the file nor the seed. Every integer seed is kept as given."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from distconv.parameter import Parameter

pytestmark = pytest.mark.timeout(30)


def _params() -> list[Parameter]:
    return [Parameter("w", np.ones(3, np.float32))]


@pytest.mark.parametrize(
    "seed, said",
    [
        (2.5, "holds 2.5, not an integer"),
        (float("nan"), "holds nan, not an integer"),
        (True, "a bool given, not an integer"),
        ("7", "a str given, not an integer"),
        ([1, 2], r"shape \(2,\) given, not an integer"),
    ],
    ids=["2.5", "nan", "bool", "str", "list"],
)
def test_a_seed_that_is_no_integer_is_refused_and_the_old_file_kept(tmp_path, seed, said):
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, _params(), step=1, seed=3)
    before = path.read_bytes()
    with pytest.raises(CheckpointError, match=rf"cannot save checkpoint .*: seed .*: {said}"):
        save_checkpoint(path, _params(), step=2, seed=seed)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize(
    "seed",
    [None, 0, 7, np.int64(7), np.uint32(7), np.array(7), 7.0, 2**70, -1],
    ids=str,
)
def test_an_integer_seed_is_kept(tmp_path, seed):
    """Numpy's generators take any int >= 0 (2**70 too); a negative one is the caller's."""
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, _params(), step=1, seed=seed)
    assert load_checkpoint(path).seed == (None if seed is None else int(seed))


def test_a_step_checkpoint_of_a_seed_that_is_no_integer_asks_no_shard(tmp_path, monkeypatch):
    from distconv.optim import create_optimizer
    from distconv.resume import Position, StepCheckpoints
    from distconv.run_dir import RunDirectory
    from distconv.sync import create_sync

    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.1))
    sync.setup(params := _params())
    asked: list[int] = []
    monkeypatch.setattr(sync, "save_remote_parts", lambda step, keep: asked.append(step) or {})
    ckpts = StepCheckpoints(RunDirectory(tmp_path / "run"), params, sync, {"seed": 2.5})
    ckpts.open(False)
    try:
        with pytest.raises(CheckpointError, match=r"of step 1 in .*: seed 2.5: holds 2.5"):
            ckpts.save(Position(0, 1, 1), {})
        assert asked == []
        assert ckpts.run.manifests() == []
    finally:
        ckpts.close()
