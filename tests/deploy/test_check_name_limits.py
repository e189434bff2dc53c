"""A StatefulSet whose name is over 52 characters is named, but a CronJob's
name has the same limit, which the API server enforces ("must be no more than 52 characters":
each Job it creates is ``<name>-<scheduled time in minutes>``, 11 more characters, and a Job's
name holds 63, as its pods' ``job-name`` label does): both passed the check."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _rendered() -> list[dict]:
    return copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))


def _with_cronjob(name: str) -> list[dict]:
    """The rendered job, its worker Job run by a CronJob ``name`` instead."""
    service, shards, job = _rendered()
    job_template = {"metadata": {"labels": job["metadata"]["labels"]}, "spec": job["spec"]}
    spec = {"schedule": "0 3 * * *", "concurrencyPolicy": "Forbid", "jobTemplate": job_template}
    metadata = {**job["metadata"], "name": name}
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata, "spec": spec}
    return [service, shards, cron]


@pytest.mark.parametrize(("length", "named"), [(52, False), (53, True), (63, True)])
def test_a_cronjob_name_over_52_characters_is_named(length, named):
    name = "c" * length
    problems = manifest_problems(_with_cronjob(name))
    line = (
        f"CronJob {name}: a CronJob's name holds at most 52 characters, got {length}: the API "
        "server refuses it: the Job made at each run, named <name>-<scheduled time>, would be "
        "longer than the 63 a Job's name holds"
    )
    assert (line in problems) is named
    assert len(problems) == named


@pytest.mark.parametrize(("length", "named"), [(63, False), (64, True)])
def test_a_job_name_over_63_characters_is_named(length, named):
    objs = _rendered()
    (job,) = [o for o in objs if o["kind"] == "Job"]
    name = job["metadata"]["name"] = "w" * length
    problems = [p for p in manifest_problems(objs) if "Indexed Job's name" not in p]
    line = (
        f"Job {name}: a Job's name holds at most 63 characters, got {length}: the API server "
        "refuses it: its pods' job-name label (the name) would be longer than a label's 63"
    )
    assert problems == ([line] if named else [])


def test_an_object_whose_kind_is_no_string_is_judged_without_a_crash():
    objs = _rendered()
    objs[0]["kind"] = ["Service"]
    assert isinstance(manifest_problems(objs), list)


@pytest.mark.parametrize(("length", "named"), [(61, False), (62, True)])
def test_an_indexed_jobs_name_too_long_for_its_pods_host_names_is_named(length, named):
    """The Job controller sets each Indexed pod's hostname to ``<job>-<index>``, which the
    API server refuses over 63 characters: a name of 62 with 2 completions passed."""
    objs = _rendered()
    (job,) = [o for o in objs if o["kind"] == "Job"]
    name = job["metadata"]["name"] = "w" * length
    line = (
        f"Job {name}: an Indexed Job's name holds at most 61 characters with 2 completions, "
        f"got {length}: its pod of index 1 gets the host name <name>-1, which the API server "
        "refuses over 63"
    )
    assert manifest_problems(objs) == ([line] if named else [])


def test_a_long_job_name_with_a_manual_selector_passes():
    """The API server adds the job-name label holding a Job's name only where
    ``manualSelector`` is not true (ValidateGeneratedSelector returns at once for one that is);
    a Job with its own selector and a name over 63 characters is created, and was refused."""
    objs = _rendered()
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["metadata"]["name"] = "w" * 64
    del job["spec"]["completionMode"]  # not Indexed: no <name>-<index> host names
    job["spec"].update(completions=1, parallelism=1, manualSelector=True)
    job["spec"]["selector"] = {"matchLabels": job["spec"]["template"]["metadata"]["labels"]}
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    env[:] = [var for var in env if var["name"] != "DISTCONV_WORLD_SIZE"]
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    args = shards["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("--workers") + 1] = "1"
    assert manifest_problems(objs) == []


@pytest.mark.parametrize(("length", "completions", "named"), [(52, 10, False), (52, 11, True)])
def test_a_cronjobs_indexed_job_too_long_for_its_pods_host_names_is_named(
    length, completions, named
):
    """534a114 judged a named Indexed Job only. A CronJob's Job is
    ``<cronjob>-<scheduled time in minutes>`` (8 digits): with a 52-character CronJob, index 10
    makes the host name ``<52>-<8>-10``, 64 characters, which the API server refuses."""
    objs = _with_cronjob("c" * length)
    job_spec = objs[2]["spec"]["jobTemplate"]["spec"]
    job_spec["completions"] = job_spec["parallelism"] = completions
    problems = [p for p in manifest_problems(objs) if "CronJob's name" in p]
    line = (
        f"CronJob {'c' * length}: a CronJob's name holds at most 51 characters with "
        f"{completions} completions of its Indexed Job, got {length}: its pod of index 10 gets "
        "the host name <name>-<scheduled time>-10, which the API server refuses over 63"
    )
    assert problems == ([line] if named else [])


@pytest.mark.parametrize(("kind", "length"), [("StatefulSet", 48), ("Job", 58)])
def test_a_generate_name_too_long_for_its_kind_is_named(kind, length):
    """The limits judged ``metadata.name`` only; the API server names an object
    given a ``generateName`` by its first 58 characters and 5 random ones, so a StatefulSet's
    of 48 gives a 53-character name (most revisions' pods are refused) and an Indexed Job's
    of 58 a 63-character one, too long for the host name of its pod of index 1."""
    objs = _rendered()
    (obj,) = [o for o in objs if o["kind"] == kind]
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "g" * length
    problems = [p for p in manifest_problems(objs) if "'s name " in p]
    assert len(problems) == 1 and f"g{'g' * (length - 1)}xxxxx:" in problems[0]
    assert ("over 52 characters, 53:" if kind == "StatefulSet" else "got 63") in problems[0]
