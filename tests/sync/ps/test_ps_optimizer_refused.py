"""Optimizers the parameter server cannot run are refused at setup, in one line.

The shards rebuild the optimizer from its ``config()`` by name, from ``distconv.optim`` of
their own install, and update each block of a parameter alone. A subclass of Adam with its own
rule (its name inherited) trained stock Adam there, exit 0; one a script registered failed on
the shard in a traceback; a rule that is not element-wise trained differently once a parameter
spans blocks. Rank 0 now refuses each before it seeds the shards (a real shard process), and
a shard refuses a name its install does not know as the job's configuration.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hand_shard import PARAMS, ROWS
from ps_helpers import pserver_sync, small_net

from distconv import optim
from distconv.optim import SGD, Adam
from distconv.sync.errors import JobRefused
from distconv.sync.ps.shard_optimizer import SHARD_REGISTRY
from tests.child_env import child_env


class SignAdam(Adam):
    """A researcher's rule on Adam's hyperparameters: ``name`` inherited ("adam")."""

    def _apply(self, value, grad, state, scale):
        value -= self.lr * np.sign(grad)


class SignSGD(SGD):
    """A rule a script registers under a name of its own."""

    name = "signsgd"

    def _apply(self, value, grad, state, scale):
        value -= self.lr * np.sign(grad)


class LayerNormSGD(SGD):
    """SGD scaled by the parameter's norm: reads the whole parameter, not one element."""

    elementwise = False


def _refusal(shards, optimizer) -> str:
    """Rank 0 of a 1-worker job sets up ``optimizer`` on one real shard: its refusal's text,
    after checking the shard was never seeded."""
    (endpoint,) = shards.start(1, 1)
    sync = pserver_sync([endpoint], optimizer, 0, 1)
    try:
        with pytest.raises(JobRefused) as raised:
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    assert "seeded with" not in shards.log_text()  # refused before any seed was sent
    said = str(raised.value)
    assert "\n" not in said, said
    return said


@pytest.mark.timeout(60)
def test_a_subclass_that_inherits_a_name_is_refused_naming_what_the_shards_build(shards):
    said = _refusal(shards, SignAdam(lr=0.01))
    assert said.startswith(
        f"optimizer {__name__}.SignAdam cannot run on the parameter server: its shards rebuild "
        "it from its config by name 'adam' and would build distconv.optim.Adam instead; "
    ), said
    assert said.endswith(SHARD_REGISTRY), said


@pytest.mark.timeout(60)
def test_an_optimizer_a_script_registered_is_refused_before_the_shard_sees_it(shards, monkeypatch):
    monkeypatch.setitem(optim.OPTIMIZERS, "signsgd", SignSGD)  # as a script does at import
    said = _refusal(shards, optim.create_optimizer("signsgd", lr=0.01))
    assert "by name 'signsgd' and know no optimizer 'signsgd'" in said, said
    assert said.endswith(SHARD_REGISTRY), said


@pytest.mark.timeout(60)
def test_a_rule_that_is_not_elementwise_is_refused_naming_the_blocks(shards):
    said = _refusal(shards, LayerNormSGD(lr=0.01))
    assert "is not element-wise" in said and "update each block alone" in said, said
    assert "local or MPI" in said, said


@pytest.mark.timeout(60)
def test_a_shipped_optimizer_still_seeds_the_shards(shards):
    (endpoint,) = shards.start(1, 1)
    sync = pserver_sync([endpoint], Adam(lr=0.01), 0, 1)
    try:
        sync.setup(small_net().parameters())
    finally:
        sync.close()
    assert "seeded with" in shards.log_text()


def test_a_shard_refuses_a_name_its_install_lacks_as_the_jobs_configuration(hand):
    """A worker on another install (one that has the class) gets past its own check: the
    shard's refusal says where it builds optimizers from, as a refusal of the job."""
    h = hand()
    head = {"op": "seed", "params": PARAMS, "table": [[0, 0, 0, ROWS]]}
    reply = h.ask({**head, "optimizer": {"name": "signsgd", "lr": 0.1}}, [np.zeros((ROWS, 1))])[0]
    assert reply["op"] == "error" and reply.get("refused") == "job", reply
    assert reply["error"].startswith("optimizer config: unknown optimizer 'signsgd'"), reply
    assert reply["error"].endswith(SHARD_REGISTRY), reply


#: a notebook's autoreload after an edit of distconv/optim.py (as its docstring says to add a
#: rule): the module's classes are made anew, and an optimizer of either import is the shards'
RELOADED = """\
import importlib
from distconv import optim
from distconv.sync.ps.shard_optimizer import unservable_problem
before = optim.create_optimizer("adam")
importlib.reload(optim)
print(unservable_problem(before), unservable_problem(optim.create_optimizer("adam")))
"""


def test_a_shipped_optimizer_after_a_reload_of_distconv_optim_is_not_refused():
    """It was: "distconv.optim.Adam ... would build distconv.optim.Adam instead" (in its own
    process: a reload here would make every later test's classes anew)."""
    done = subprocess.run(
        [sys.executable, "-c", RELOADED], env=child_env(), capture_output=True, text=True,
        timeout=50,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["None", "None"], done.stdout
