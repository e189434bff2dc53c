"""docs/operations.md, "Using a trained model": its commands and Python examples run as written,
in that order (its run in ``runs/digits`` first), and its example line of ``distconv evaluate``
has the form the command prints."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from tests.child_env import REPO_ROOT
from tests.test_evaluate_cmd import distconv

pytestmark = pytest.mark.timeout(180)

SECTION = "## Using a trained model\n"


def _section() -> str:
    text = (REPO_ROOT / "docs" / "operations.md").read_text()
    start = text.index(SECTION)
    return text[start : text.index("\n## ", start + len(SECTION))]


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", _section(), flags=re.S)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A folder in which the section's commands ran as written, each with status 0: its run in
    ``runs/digits`` and the evaluations of it, ``--log-format json``'s one JSON object."""
    where = tmp_path_factory.mktemp("docs")
    (commands,) = _blocks("bash")
    for line in commands.splitlines():
        argv = shlex.split(line, comments=True)
        assert argv[0] == "distconv", line
        done = distconv(*argv[1:], cwd=where)
        assert done.returncode == 0, (line, done.stderr[-3000:])
        if "--log-format" in argv and argv[1] == "evaluate":
            (said,) = done.stdout.splitlines()
            assert json.loads(said)["step"] == 90, said
    return where


def test_the_python_examples_run_as_written(base, monkeypatch):
    monkeypatch.chdir(base)
    predicting, exporting = _blocks("python")
    names: dict = {}
    exec(predicting, names)
    assert names["logits"].shape == (359, 10)
    np.testing.assert_array_equal(names["ids"], names["logits"].argmax(axis=1))
    exec(exporting, names)
    assert sorted(names["weights"]) == sorted(
        f"{layer}.{kind}"
        for layer in ("conv1", "conv2", "fc1", "fc2")
        for kind in ("bias", "weight")
    )
    facts = names["facts"]
    assert (facts["format"], facts["step"]) == ("distconv-checkpoint", "90")
    named = "`format`, `version`, `step`, `epoch`, `seed`, `build`, `optimizer`, `extra`, `sha256`"
    assert set(facts) == set(re.findall(r"`(\w+)`", named))


def test_the_example_line_has_the_form_the_command_prints(base):
    done = distconv("evaluate", "--from", "runs/digits", cwd=base)
    assert done.returncode == 0, done.stderr
    form = (
        r"test_loss [0-9.]+  test_acc [0-9.]+  \(digits test split of seed 0, 359 examples; "
        r"checkpoint step 90, epoch 1: runs/digits/checkpoints/step-00000090/chief.safetensors\)"
    )
    shown = re.findall(r"^test_loss .*$", _section(), flags=re.M)
    assert len(shown) == 1 and re.fullmatch(form, shown[0])
    assert re.fullmatch(form, done.stdout.strip())
