"""The equivalence check on a model of one's own (``Job(model=..., dataset=...)``) under a real
``mpiexec -n 2``, as a layer's author runs it: a layer of one's own whose weight two layers
share matches one process in float64. One whose backward assigns its share of the shared
weight's gradient fails it where gradients accumulate over passes (the reference's passes hold
other examples than the ranks'), naming a parameter; with one pass a step it matches, as the
reference makes the same mistake: the check compares ranks with one process, not gradients
with their derivatives, which ``check_network_grad`` does."""

from __future__ import annotations

import re

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_two_ranks

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]

#: a failure of the check, naming the parameter furthest from the reference and by how much
FAILED = re.compile(
    r"rank (\d) of 2: parameter '(a1\.g|a1\.b|a2\.b|fc1\.weight|fc1\.bias|fc2\.weight|fc2\.bias)'"
    r" is ([0-9.e-]+) from the reference's at "
)


def said(out) -> list[str]:
    return [(out / f"rank{rank}.txt").read_text() for rank in (0, 1)]


def test_a_model_of_one_s_own_with_a_shared_weight_matches_one_process(tmp_path):
    run_two_ranks("run_own_model.py", tmp_path)
    assert said(tmp_path) == ["matches", "matches"]


def test_a_shared_weight_s_gradient_assigned_fails_where_passes_accumulate(tmp_path):
    run_two_ranks("run_own_model.py", tmp_path, "--broken", "--accumulate", "2")
    for rank, text in enumerate(said(tmp_path)):
        named = FAILED.match(text)
        assert named and int(named[1]) == rank and float(named[3]) > 1e-6, text


def test_with_one_pass_a_step_the_reference_makes_the_same_mistake_and_it_matches(tmp_path):
    run_two_ranks("run_own_model.py", tmp_path, "--broken")
    assert said(tmp_path) == ["matches", "matches"]


def test_a_model_of_one_s_own_stopped_and_resumed_matches_one_process(tmp_path):
    run_two_ranks("run_own_model.py", tmp_path, "--restart")
    assert said(tmp_path) == ["matches", "matches"]
    assert (tmp_path / "run" / "checkpoints").is_dir()  # rank 0 wrote there, and resumed
