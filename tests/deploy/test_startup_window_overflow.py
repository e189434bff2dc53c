"""A ``--timeout`` so long that twice its late-rank rounds overflow a float (past about 9e306
s, still finite, so ``distconv train`` takes it) gives the longest startup window the API
server takes, as 2e9 s does; the renderer and ``distconv check-manifests`` raised
``OverflowError`` with a traceback on it (``math.ceil`` of infinity)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.deploy.counts import MAX_COUNT
from tests.deploy.hand_edits import (
    PS_SHARDS_FILE,
    PS_WORKERS_FILE,
    copied_example,
    edit,
    one_container,
    one_problem,
    passes,
    rendered,
)

pytestmark = pytest.mark.timeout(120)

#: finite, but 2 x 10 rounds of it are not
HUGE = "1e308"


def test_the_render_gives_the_longest_window_the_api_server_takes(tmp_path: Path):
    out = rendered(tmp_path, "--workers", "2", "--servers", "1", "--image", "d:1",
                   "--job-name", "demo", "--", "--epochs", "1", "--timeout", HUGE)  # fmt: skip
    passes(out)


@pytest.mark.parametrize(("failures", "named"), [(120, True), (MAX_COUNT, False)])
def test_the_check_judges_a_probe_beside_such_shards(tmp_path: Path, failures: int, named: bool):
    example = copied_example("pserver", tmp_path)
    for name in (PS_WORKERS_FILE, PS_SHARDS_FILE):
        edit(example / name, lambda obj: one_container(obj)["args"].extend(["--timeout", HUGE]))
    edit(example / PS_WORKERS_FILE, lambda obj: one_container(obj)["startupProbe"].update(
        failureThreshold=failures))  # fmt: skip
    if not named:
        passes(example)
        return
    _, what = one_problem(example)
    assert what.startswith("Job digits-ps-worker container worker: startupProbe holds liveness")
    # ten rounds of 1e308 s are past the largest float: said so, not "inf s"
    assert "a worker waits up to more than 1.79769e+308 s for ranks late" in what, what
    assert what.endswith(f"give failureThreshold {MAX_COUNT} ({10 * MAX_COUNT} s), as a rendered "
                         "job's workers are given at that --timeout")  # fmt: skip
