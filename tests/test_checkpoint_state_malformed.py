"""A step checkpoint of optimizer state that holds no numbers is refused by name.

``StepCheckpoints.save`` checks the state for NaN and infinity before it is written (5226237),
and ``save_checkpoint`` names a state that is no mapping, or an entry that holds no numbers
(``cannot save checkpoint ...: optimizer state for 'w' is a NoneType, ...``). The finiteness
check came first and raised a bare ``AttributeError: 'NoneType' object has no attribute 'items'``
or ``TypeError: ufunc 'isfinite' not supported for the input types`` instead: it now leaves what
holds no numbers to that named refusal.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.resume import Position, StepCheckpoints
from distconv.run_dir import RunDirectory
from distconv.sync.local import LocalSync

CASES = [
    ({"w": None}, "optimizer state for 'w' is a NoneType, not a mapping of state keys to arrays"),
    ({"w": {"m": "ab"}}, "optimizer state w/m: a str given, not an array of numbers"),
    ({"w": {"step": None}}, "optimizer state w/step: a NoneType given, not an array of numbers"),
]


class OddState(LocalSync):
    """A sync whose checkpoint state is ``odd`` (a strategy of another author's)."""

    def __init__(self, odd: Any) -> None:
        super().__init__(create_optimizer("adam"))
        self.odd = odd

    def checkpoint_state(self) -> Any:
        return self.odd


@pytest.mark.timeout(30)
@pytest.mark.parametrize("state,said", CASES)
def test_a_step_checkpoint_of_state_without_numbers_is_refused_by_name(tmp_path, state, said):
    sync, w = OddState(state), Parameter("w", np.ones(2))
    ckpts = StepCheckpoints(RunDirectory(tmp_path / "run"), [w], sync, {"seed": 0})
    try:
        sync.setup([w])
        ckpts.open(False)
        with pytest.raises(CheckpointError) as refused:
            ckpts.save(Position(0, 1, 1), {})
    finally:
        ckpts.close()
    assert str(refused.value).startswith("cannot save checkpoint "), refused.value
    assert str(refused.value).endswith(f"chief.safetensors: {said}"), refused.value
    assert ckpts.run.manifests() == []
