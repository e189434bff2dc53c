"""A layer of one's own that breaks the firing rules, trained through MPISync under
``mpiexec -n 2`` (``run_layer_mistakes.py``): every rank stops with the Network's error, which
names the parameter and the layer, where MPISync refused it in its own words."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.layer_mistakes import local_run
from tests.mpi.common import run_two_ranks

pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def ranks_of(
    tmp_path: Path, mistake: str, *options: str
) -> list[tuple[dict | None, dict[str, np.ndarray]]]:
    """Each rank's error (None where it trained on) and weights, from ``mistake``'s job."""
    run_two_ranks("run_layer_mistakes.py", tmp_path, mistake, *options)
    return [
        (
            json.loads((tmp_path / f"rank{r}.json").read_text()),
            dict(np.load(tmp_path / f"rank{r}.npz")),
        )
        for r in range(2)
    ]


def test_a_parameter_fired_twice_stops_every_rank_naming_the_layer(tmp_path):
    """MPISync refused it ("fired twice in step 0"), naming no layer and no rule."""
    for error, _ in ranks_of(tmp_path, "twice"):
        assert error["class"] == "NetworkError", error
        said = error["message"]
        assert "'ss1.bias' fired twice in one backward pass" in said and "'ss1'" in said, said


@pytest.mark.parametrize(("mistake", "has"), [("rebind_shape", "(3, 1)"), ("rebind16", "float16")])
def test_a_gradient_of_another_shape_or_dtype_stops_every_rank_naming_it(tmp_path, mistake, has):
    """MPISync named the parameter alone for another shape, and trained on in float16."""
    for error, _ in ranks_of(tmp_path, mistake):
        assert error["class"] == "NetworkError", error
        said = error["message"]
        assert "gradient of 'ss1.bias'" in said and "layer 'ss1'" in said, said
        assert has in said and "it must have shape (3,) and dtype float64" in said, said


def test_a_gradient_rebound_to_its_own_shape_and_dtype_trains_as_on_one_process(tmp_path):
    """MPISync adopts it (copies it into its bucket): two ranks give one process's weights."""
    ranks = ranks_of(tmp_path, "rebind")
    right, _ = local_run(None)
    for error, got in ranks:
        assert error is None
        for name, value in right.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-12, atol=1e-14, err_msg=name)


def test_a_share_added_after_firing_stops_every_rank_naming_the_layer(tmp_path):
    """MPISync reduced the weight without the share and zeroed it: exit 0, the weight off."""
    for error, _ in ranks_of(tmp_path, "early"):
        assert error["class"] == "NetworkError", error
        said = error["message"]
        assert "layer 'ss1' wrote into the gradient of 'ss1.weight' after firing it" in said


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_correct_layer_is_not_refused_while_its_gradients_are_reduced(tmp_path, overlap):
    """The first pass guards each fired gradient while the rest of its layer's backward runs;
    meanwhile MPISync reduces it in place (on its thread, or at the next fire's test of the
    wire, in 16-byte buckets): no refusal, and two ranks train as one process."""
    right, _ = local_run(None)
    for error, got in ranks_of(tmp_path, "none", "--overlap", overlap):
        assert error is None, error
        for name, value in right.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-12, atol=1e-14, err_msg=name)
