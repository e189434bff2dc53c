"""``Job(model=..., dataset=...)``: the equivalence check's job on a model and data of one's
own (``tests/own_model.py``), each rank's model drawn from the check's seed, the data the same
at every call; what cannot reach spawned ranks, or is no model, refused before anything trains.
Under ``mpiexec``: ``tests/mpi/test_own_model_matches_local.py``."""

import dataclasses

import numpy as np
import pytest

from distconv.equivalence import JOB, RESUMED_JOB, Job, assert_matches_local, reference_weights
from distconv.equivalence_restart import refuse_restart_at
from distconv.sync.local import LocalSync
from tests.own_model import own_data, own_model

OWN = Job(model=own_model, dataset=own_data)


def values(net) -> dict[str, np.ndarray]:
    return {p.name: p.value.copy() for p in net.parameters()}


def test_each_rank_s_model_is_one_s_own_drawn_from_the_check_s_seed():
    first, again, other = OWN.model_of(0), OWN.model_of(0), OWN.model_of(1)
    assert first["a1"].g is first["a2"].g and first["a1"].g.shared_count == 2
    names = ["a1.b", "a1.g", "a2.b", "fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    assert sorted(values(first)) == names
    for name, value in values(first).items():
        np.testing.assert_array_equal(value, values(again)[name])
    assert not np.array_equal(values(first)["a1.g"], values(other)["a1.g"])
    assert not np.array_equal(values(first)["a1.g"], values(OWN.model_of(0, resumed=True))["a1.g"])


def test_the_data_is_one_s_own_of_the_job_s_count_and_trains_the_reference():
    data = OWN.data(2)
    assert sorted(data) == ["target", "x"] and len(data["x"]) == 5 * 8 + 4 + 1
    np.testing.assert_array_equal(data["x"], OWN.data(2)["x"])
    start = values(OWN.model_of(0))
    trained = reference_weights(2, OWN)
    assert max(np.abs(trained[n] - start[n]).max() for n in start) > 1e-3


def test_the_default_job_is_the_lenet_on_images_and_classes():
    assert sorted(JOB.data(2)) == ["image", "label"]
    assert "conv1.weight" in values(JOB.model_of(0))


def test_a_restart_past_the_end_of_one_s_own_data_is_refused_by_its_count():
    job = dataclasses.replace(RESUMED_JOB, model=own_model, dataset=own_data, epochs=1)
    with pytest.raises(ValueError, match=r"past the job's last, step 6 \(1 epochs of 6\)"):
        refuse_restart_at(job, 2)


def test_a_model_that_cannot_reach_spawned_ranks_is_refused_before_any_starts():
    job = Job(model=lambda seed: own_model(seed), dataset=own_data)
    with pytest.raises(TypeError, match=r"^Job\.model must be picklable"):
        assert_matches_local(LocalSync, 2, job)


def test_a_model_that_returns_no_network_is_refused_naming_the_job_s_model():
    with pytest.raises(TypeError, match=r"^Job\.model\(101\) returned dict, not a Network$"):
        Job(model=lambda seed: {}).model_of(1)


def twenty_rows(examples: int) -> dict[str, np.ndarray]:
    """A training set of its own size, whatever the count asked for."""
    return own_data(20)


def test_a_restart_past_the_end_of_a_set_of_its_own_size_is_refused_by_its_rows():
    """The stop was judged by the count the job asks its dataset for, not the rows it gave:
    20 rows are 3 steps an epoch at 2 ranks, 9 in all, and a stop at 16 was let through; each
    rank trained the whole job, then said that it ended before the ranks agreed on a stop."""
    job = dataclasses.replace(RESUMED_JOB, model=own_model, dataset=twenty_rows, restart_at=16)
    with pytest.raises(ValueError, match=r"past the job's last, step 9 \(3 epochs of 3\)"):
        refuse_restart_at(job, 2)
