"""The workers' server list is compared with the shards' names as the ranks read it
(:func:`distconv.runtime.detect_runtime`): blanks around an entry stripped, the port a number,
a blank DISTCONV_PSERVERS unset. The check refused lists the runtime takes."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.runtime import detect_runtime

pytestmark = pytest.mark.timeout(60)

SHARDS = ["j-pserver-0.j-pserver:5555", "j-pserver-1.j-pserver:5555"]


def _job(objs: list[dict]) -> dict:
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container


def _with(pservers: str | None, env: str | None) -> list[str]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=2, image="d:1"))
    container = _job(objs)
    args = container["args"]
    at = args.index("--pservers")
    if pservers is None:
        del args[at : at + 2]
    else:
        args[at + 1] = pservers
    for var in container["env"]:
        if var["name"] == "DISTCONV_PSERVERS":
            var["value"] = env
    return manifest_problems(objs)


@pytest.mark.parametrize(
    "text",
    [
        ", ".join(SHARDS),  # a space after the comma
        " " + " , ".join(SHARDS) + " ",
        ",".join(s.replace(":5555", ":05555") for s in SHARDS),
    ],
    ids=["space", "blanks", "leading-zero-port"],
)
def test_a_list_the_runtime_reads_as_the_shards_passes(text):
    env = {"DISTCONV_PSERVERS": text}
    assert [a.strip() for a in detect_runtime(environ=env).pservers] == [
        a.strip() for a in text.split(",")
    ]  # the ranks take it: the same shards
    assert _with(text, text) == []


def test_a_list_that_names_other_shards_is_still_refused():
    text = ", ".join([SHARDS[0], SHARDS[0].replace("-0.", "-2.")])
    problems = _with(text, text)
    assert len(problems) == 2 and all("is not the shards' DNS names" in p for p in problems)
    wrong_port = ",".join(s.replace(":5555", ":5556") for s in SHARDS)
    assert len(_with(wrong_port, ",".join(SHARDS))) == 1


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_pservers_variable_is_unset_as_the_ranks_read_it(blank):
    """A blank DISTCONV_PSERVERS is no server list to the ranks (they read --pservers); the
    check called it 'not the shards' DNS names'. An MPIJob's launcher with one is not 'set'."""
    assert detect_runtime(environ={"DISTCONV_PSERVERS": blank}).pservers == ()
    assert _with(",".join(SHARDS), blank) == []
    objs = copy.deepcopy(render_manifests(job_name="m", workers=2, servers=0, image="d:1"))
    launcher = objs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    launcher["containers"][0]["env"].append({"name": "DISTCONV_PSERVERS", "value": blank})
    assert manifest_problems(objs) == []
