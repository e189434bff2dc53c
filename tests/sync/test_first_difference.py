"""first_difference: a sentence for every pair of descriptions that differ, never None."""

import json

import pytest

from distconv.sync.description import digest, first_difference, key_order


def _rt(d):
    return json.loads(json.dumps(d, sort_keys=True, default=str))


def test_a_parameters_key_inside_a_setting_is_named_with_its_setting():
    ours = {"config.model": {"layers": 3, "parameters": [1, 2]}}
    theirs = {"config.model": {"layers": 3, "parameters": [1, 5]}}
    assert first_difference(ours, theirs) == ("config.model.parameters: [1, 2] here, [1, 5] there")


def test_the_job_parameters_still_name_the_parameter():
    ours = {"parameters": [["a", [2], "float32"], ["b", [3], "float32"]]}
    theirs = {"parameters": [["a", [2], "float32"], ["b", [4], "float32"]]}
    assert first_difference(ours, theirs).startswith("parameter 1: ")


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ({"config.data": {"split": "<missing>"}}, {"config.data": {}}),  # a value like the marker
        ({"config.epochs": 3}, {"config.epochs": 3.0}),  # digests differ, == does not
        ({"config.data": {"shuffle": True}}, {"config.data": {"shuffle": 1}}),
        ({"config.x": -0.0}, {"config.x": 0.0}),
    ],
)
def test_descriptions_whose_digests_differ_get_a_sentence(ours, theirs):
    ours, theirs = _rt(ours), _rt(theirs)
    assert digest(ours) != digest(theirs)
    said = first_difference(ours, theirs)
    assert said is not None and " here, " in said and said.startswith("config.")


def test_keys_of_several_types_in_one_setting_do_not_stop_it():
    said = first_difference({"config.c": {1: "a", "b": 2}}, {"config.c": {1: "a", "b": 3}})
    assert said == "config.c.b: 2 here, 3 there"


def test_equal_descriptions_have_no_difference():
    d = {"optimizer": {"name": "sgd", "lr": float("nan")}, "config.x": [1, {"y": 2}]}
    assert first_difference(_rt(d), _rt(d)) is None


def test_numbered_keys_go_in_their_numbers_order():
    """A layout mismatch names bucket 2 before bucket 10 (as text, "bucket 10" came first)."""
    ours = {f"bucket {i}": [i] for i in range(12)}
    theirs = {**ours, "bucket 2": [0], "bucket 10": [0]}
    assert first_difference(ours, theirs) == "bucket 2: [2] here, [0] there"
    assert first_difference({"name": 1, "a": 1}, {"name": 2, "a": 2}).startswith("name: ")


def test_keys_alike_as_numbers_sort_the_same_whatever_came_first():
    """``a1`` and ``a01`` are one number: text decides, not the set's (hash-seeded) order, or
    two ranks could name different keys for one mismatch."""
    keys = ["step a01", "step a1", "step a001", "name", "bucket 10", "bucket 2"]
    ahead = sorted(keys, key=key_order)
    assert ahead == sorted(reversed(keys), key=key_order)
    assert ahead[:3] == ["name", "bucket 2", "bucket 10"]


def test_a_key_with_a_long_run_of_digits_is_still_named():
    """int() refuses over 4,300 digits (sys.get_int_max_str_digits): the mismatch is named."""
    long = "x" + "9" * 5000
    said = first_difference({long: 1, "x10": 1}, {long: 2, "x10": 1})
    assert said == f"{long}: 1 here, 2 there"
