"""GNU env's ``-a NAME`` (``--argv0 NAME``, coreutils 9.5 on) takes a value: ``env -a rank -u
DISTCONV_WORLD_SIZE distconv train`` unsets the variable. Read as an option of its own, its
value ended env's options, and the ``-u`` after it was not read (audit k252)."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.shell import removes_variable

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "before",
    [
        ["env", "-a", "rank", "-u", "DISTCONV_WORLD_SIZE"],
        ["env", "-arank", "-u", "DISTCONV_WORLD_SIZE"],
        ["env", "-va", "rank", "-u", "DISTCONV_WORLD_SIZE"],
        ["env", "--argv0", "rank", "-u", "DISTCONV_WORLD_SIZE"],
        ["env", "--argv0=rank", "-u", "DISTCONV_WORLD_SIZE"],
        ["env", "-a", "rank", "-i"],
    ],
)
def test_options_after_argv0_are_read(before):
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*before, *container["args"]]
    problems = manifest_problems(objs)
    # env -u: the index kept, the world size gone; env -i: both gone (rank 0 of 1)
    unset = ("DISTCONV_WORLD_SIZE is not set", "takes JOB_COMPLETION_INDEX from them")
    assert any(u in p for p in problems for u in unset), problems


def test_argv0_s_value_is_no_option():
    """``env -a -u distconv ...``: ``-u`` is the name given to argv[0], nothing is unset."""
    argv = ["env", "-a", "-u", "DISTCONV_WORLD_SIZE=2", "distconv", "train"]
    assert not removes_variable(argv, "DISTCONV_WORLD_SIZE")
    assert removes_variable(["env", "-a", "x", "-u", "N", "distconv"], "N")
