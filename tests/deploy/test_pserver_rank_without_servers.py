"""A rank run with ``--sync pserver`` and no server list (no ``--pservers``, no or a blank
``DISTCONV_PSERVERS``) stops at start (``--sync pserver needs the servers``); the check passed
such a workers' Job beside the job's shards."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems, render_manifests
from tests.child_env import child_path

pytestmark = pytest.mark.timeout(120)

NAMES_NONE = "distconv train --sync pserver names no shards"


def _workers(env_value: dict | None, flag: bool = False) -> list[dict]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    if not flag:
        args = container["args"]
        at = args.index("--pservers")
        del args[at : at + 2]
    container["env"] = [v for v in container["env"] if v["name"] != "DISTCONV_PSERVERS"]
    if env_value is not None:
        container["env"].append({"name": "DISTCONV_PSERVERS", **env_value})
    return objs


@pytest.mark.parametrize("env_value", [None, {"value": ""}, {"value": "  "}])
def test_a_pserver_rank_with_no_server_list_is_refused(env_value):
    (problem,) = manifest_problems(_workers(env_value))
    assert problem.startswith("Job j-worker container worker: " + NAMES_NONE), problem


@pytest.mark.parametrize(
    "env_value, flag",
    [
        ({"value": "j-pserver-0.j-pserver:5555"}, False),
        ({"valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}, False),
        (None, True),
    ],
)
def test_a_server_list_from_either_source_passes(env_value, flag):
    assert manifest_problems(_workers(env_value, flag)) == []


def test_the_rank_refuses_to_start_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTCONV_")}
    env.update(DISTCONV_PSERVERS=" ", PYTHONPATH=child_path())
    run = subprocess.run(
        [sys.executable, "-m", "distconv", "train", "--sync", "pserver", "--insecure"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert run.returncode != 0 and "--sync pserver needs the servers" in run.stderr, run.stderr
