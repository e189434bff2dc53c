"""GNU env's options that take a value are read as env reads them.

``env -S STRING`` (``--split-string``) runs the words env splits the string into, read as if
written there: ``env -S "-u DISTCONV_WORLD_SIZE" distconv train`` unsets the variable, and
``env -S "distconv train --out /opt/x"`` is a rank with that --out. Left as one word, the
variables were read as the pod's and the rank's flags went unjudged.

``-a NAME`` (``--argv0 NAME``, coreutils 9.5 on) takes a value too: ``env -a rank -u
DISTCONV_WORLD_SIZE distconv train`` unsets the variable. Read as an option of its own, its value
ended env's options, and the ``-u`` after it was not read."""

from __future__ import annotations

import copy
import os
import shlex
import subprocess

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.env_options import split_env_strings
from distconv.deploy.shell import removes_variable

pytestmark = pytest.mark.timeout(60)


def _objs(edit) -> list[dict]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    edit(container)
    return objs


def _assert_read_as_unset(before: list[str]) -> None:
    """The workers' rank run behind ``before`` is judged as missing what env removes."""
    problems = manifest_problems(_objs(lambda c: c.__setitem__("args", [*before, *c["args"]])))
    # env -u: the index kept, the world size gone; env -i: both gone (rank 0 of 1)
    unset = ("DISTCONV_WORLD_SIZE is not set", "takes JOB_COMPLETION_INDEX from them")
    assert any(u in p for p in problems for u in unset), problems


@pytest.mark.parametrize(
    "before",
    [
        ["env", "-S", "-u DISTCONV_WORLD_SIZE"],
        ["env", "-S-u DISTCONV_WORLD_SIZE"],
        ["env", "-vS", "-u DISTCONV_WORLD_SIZE"],
        ["env", "--split-string=-u DISTCONV_WORLD_SIZE"],
        ["env", "--split-string", "-i PATH=/usr/bin"],
        ["/usr/bin/env", "-S", "-C /tmp -u DISTCONV_WORLD_SIZE"],
    ],
)
def test_a_variable_an_env_string_removes_is_read_as_unset(before):
    _assert_read_as_unset(before)


def test_a_job_id_an_env_string_sets_is_read_with_its_value():
    """Its value was read as the rest of the string ('other A=b'), or not at all."""

    def edit(container: dict) -> None:
        container["args"] = ["env", "-S", "DISTCONV_JOB_ID=other A=b", *container["args"]]

    (problem,) = manifest_problems(_objs(edit))
    assert "job id 'other' (DISTCONV_JOB_ID)" in problem


def test_a_rank_in_an_env_string_gets_the_checks():
    def edit(container: dict) -> None:
        args = container["args"]
        args[args.index("--out") + 1] = "/opt/x"
        container["args"] = ["env", "-S", shlex.join(args)]

    (problem,) = manifest_problems(_objs(edit))
    assert "--out /opt/x is on no writable volume" in problem


@pytest.mark.parametrize("text", ["-u ${X} distconv", "-u X\\tY", "A=1 # c", "'open"])
def test_a_string_env_expands_or_escapes_stays_as_written(text):
    assert split_env_strings(["env", "-S", text, "distconv"]) == ["env", "-S", text, "distconv"]


def test_the_split_is_what_env_runs():
    argv = ["env", "-S", "-u DROPPED 'A=1 2' env"]
    assert split_env_strings(argv) == ["env", "-u", "DROPPED", "A=1 2", "env"]
    out = subprocess.run(
        argv, env={**os.environ, "DROPPED": "x"}, capture_output=True, text=True, check=True
    )
    lines = out.stdout.splitlines()
    assert "A=1 2" in lines and not [v for v in lines if v.startswith("DROPPED=")]
    # after distconv the words are its own
    tail = ["distconv", "train", "env", "-S", "a b"]
    assert split_env_strings(tail) == tail


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
    _assert_read_as_unset(before)


def test_argv0_s_value_is_no_option():
    """``env -a -u distconv ...``: ``-u`` is the name given to argv[0], nothing is unset."""
    argv = ["env", "-a", "-u", "DISTCONV_WORLD_SIZE=2", "distconv", "train"]
    assert not removes_variable(argv, "DISTCONV_WORLD_SIZE")
    assert removes_variable(["env", "-a", "x", "-u", "N", "distconv"], "N")
