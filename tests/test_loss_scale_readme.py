"""README.md's "A layer, a network, a step": its sync variant of the step runs as written, with
no warning, and, with ``loss_scale`` dropped, gets the warning the text around it promises."""

from __future__ import annotations

import re
import warnings

import pytest

from tests.child_env import REPO_ROOT

pytestmark = pytest.mark.timeout(60)

SECTION = "## A layer, a network, a step"


def step_snippets() -> tuple[str, str]:
    """The section's first two Python blocks: the network and its step, then the sync's step."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text[text.index(SECTION) :].split("\n## ", 1)[0]
    network, sync_step = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    assert "start_step" in sync_step and "loss_scale=len(y)" in sync_step
    return network, sync_step


def test_the_readme_sync_step_runs_as_written_without_a_warning():
    network, sync_step = step_snippets()
    space: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(compile(network + sync_step, "README.md", "exec"), space)
    assert space["sync"].step_examples == 16


def test_the_readme_sync_step_without_loss_scale_is_warned_of():
    network, sync_step = step_snippets()
    unscaled = sync_step.replace("net.backward(sync, loss_scale=len(y))", "net.backward(sync)")
    with pytest.warns(UserWarning, match=r"a mean over 16 rows, with loss_scale=1"):
        exec(compile(network + unscaled, "README.md", "exec"), {})
