"""``distconv check-manifests`` names a job whose shards and workers were edited apart: the
workers' ``--timeout`` below a shard's least, or the shards' other than the workers'.

A rendered job gives its shards the workers' ``--timeout``. The check named only shards that
outwait the workers' wait for a reply (1.5 x their ``--timeout``); it passed workers edited to
``--timeout 0.05`` beside shards at their least, 0.2 s (as the renderer once gave them in
silence), which ``distconv-launch local`` refuses, and shards edited to 10 or 25 beside workers
of 20: shorter, they fail a step that a worker comes to within the workers' ``--timeout``;
longer, they name a worker that never comes later than the workers asked.

Each test renders with the real launcher into real files, edits them as an operator would,
and runs the real check command on the folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.shard_timeout import below_the_shards_least
from tests.deploy.hand_edits import (
    DEMO_SHARDS,
    DEMO_SHARDS_FILE,
    DEMO_WORKERS,
    DEMO_WORKERS_FILE,
    one_problem,
    rendered_demo,
    set_timeout,
)
from tests.deploy.test_check_manifests_command import check

pytestmark = pytest.mark.timeout(120)


def _disagreeing(shards: str, workers: str, why: str) -> str:
    return (
        f"{DEMO_SHARDS}: the shards' --timeout ({shards}) is not that of the workers of "
        f"{DEMO_WORKERS} ({workers}): {why}; give the shards --timeout {workers}, as a rendered "
        "job's shards are given their workers'"
    )


SOONER = (
    "a shard fails a step or a gather that a worker comes to more than 10 s after the others, "
    "sooner than the workers' --timeout allows"
)
LATER = "a worker that never comes is named only 25 s in, later than the workers' --timeout asks"
#: a line that names both objects is located in both files, each at its object
BOTH = [DEMO_WORKERS_FILE, DEMO_SHARDS_FILE]


@pytest.mark.parametrize(
    ("rendered", "edits", "files", "said"),
    [
        # the shards as the render once gave them for workers of 0.05: 0.2, in silence
        ("0.2", {DEMO_WORKERS_FILE: "0.05"}, [DEMO_WORKERS_FILE],
         f"{DEMO_WORKERS}: {below_the_shards_least(0.05)}"),
        ("20", {DEMO_SHARDS_FILE: "10"}, BOTH, _disagreeing("10", "20", SOONER)),
        ("20", {DEMO_SHARDS_FILE: "25"}, BOTH, _disagreeing("25", "20", LATER)),
        ("10", {DEMO_WORKERS_FILE: "20"}, BOTH, _disagreeing("10", "20", SOONER)),
    ],
    ids=["workers-below-the-least", "shards-shorter", "shards-longer", "workers-raised-alone"],
)  # fmt: skip
def test_the_check_names_shards_and_workers_edited_apart(
    tmp_path: Path, rendered: str, edits: dict[str, str], files: list[str], said: str
):
    out = rendered_demo(tmp_path, rendered)
    for name, value in edits.items():
        set_timeout(out / name, value)
    located, what = one_problem(out)
    assert what == said
    assert located == [str(out / name) for name in files]


@pytest.mark.parametrize("value", ["20", "20.0", "2e1"])
def test_the_same_seconds_however_written_agree(tmp_path: Path, value: str):
    out = rendered_demo(tmp_path, "20")
    set_timeout(out / DEMO_SHARDS_FILE, value)
    assert check(str(out)) == (0, "no problems\n", "")
