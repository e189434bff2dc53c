"""Each problem line of ``distconv check-manifests`` names the file its object is written in,
and the line its document starts on (review k364): ``job.yaml:12: Job x: ...``. With several
files (a folder, a chart rendered to many), a line naming the object alone left its reader to
search each file for it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distconv.deploy import located
from tests.deploy.test_check_manifests_command import EXAMPLES, GRACE_LINE, check, short_grace

pytestmark = pytest.mark.timeout(120)

LABELS = ("name", "instance", "component")


@pytest.fixture
def pserver(tmp_path: Path) -> Path:
    """A copy of the shipped parameter-server example."""
    return Path(shutil.copytree(EXAMPLES / "pserver", tmp_path / "pserver"))


def unlabelled(name: str) -> list[str]:
    """The three problems of a ConfigMap ``name`` without the job's labels."""
    return [f"ConfigMap {name}: label app.kubernetes.io/{label} is missing" for label in LABELS]


def config_map(name: str) -> str:
    return f"kind: ConfigMap\nmetadata:\n  name: {name}\n"


def test_each_problem_names_its_file(pserver):
    """The shipped example with one problem in each of two files: each line says which."""
    job = short_grace(pserver)
    extra = pserver / "extra.yaml"
    extra.write_text(config_map("extra"))
    status, out, err = check(str(pserver))
    assert (status, err) == (1, "")
    assert out.splitlines() == [
        *(f"{extra}:1: {line}" for line in unlabelled("extra")),
        f"{job}:1: {GRACE_LINE}",
    ]


def test_the_line_is_where_the_objects_document_starts(tmp_path):
    stream = tmp_path / "stream.yaml"
    stream.write_text("# two maps\n---\n" + config_map("a") + "---\n\n" + config_map("b"))
    status, out, err = check(str(stream))
    assert (status, err) == (1, "")
    assert out.splitlines() == [
        *(f"{stream}:3: {line}" for line in unlabelled("a")),
        *(f"{stream}:8: {line}" for line in unlabelled("b")),
    ]


def test_a_lists_items_and_what_it_refuses_name_the_list(tmp_path):
    """A List's items have no line of their own once read: the List's is given."""
    listed = tmp_path / "list.json"
    listed.write_text(
        '\n{"kind": "List", "items": [5, {"kind": "ConfigMap", "metadata": {"name": "c"}}]}'
    )
    status, out, err = check(str(listed))
    assert (status, err) == (1, "")
    assert out.splitlines() == [
        f"{listed}:2: 5 is no object (kind, metadata, ...): kubectl apply refuses it",
        *(f"{listed}:2: {line}" for line in unlabelled("c")),
    ]


def test_stdin_and_an_object_written_twice(tmp_path):
    """Both places of an object written in two inputs are named: kubectl applies it twice."""
    twice = tmp_path / "twice.yaml"
    twice.write_text(config_map("c"))
    status, out, err = check("-", str(twice), stdin=config_map("c").encode())
    assert (status, err) == (1, "")
    assert out.splitlines() == 2 * [f"<stdin>:1, {twice}:1: {line}" for line in unlabelled("c")]


def test_a_longer_name_is_not_taken_for_a_shorter_one(tmp_path):
    """``ConfigMap a`` names no problem of ``ConfigMap a-b``, nor ``a b`` of ``a``."""
    (tmp_path / "1.yaml").write_text(config_map("a"))
    (tmp_path / "2.yaml").write_text(config_map("a-b"))
    (tmp_path / "3.yaml").write_text(config_map("'a b'"))
    status, out, err = check(str(tmp_path))
    assert (status, err) == (1, "")
    expected = {
        *(f"{tmp_path / '1.yaml'}:1: {line}" for line in unlabelled("a")),
        *(f"{tmp_path / '2.yaml'}:1: {line}" for line in unlabelled("a-b")),
        *(f"{tmp_path / '3.yaml'}:1: {line}" for line in unlabelled("a b")),
    }
    assert set(out.splitlines()) == expected and len(out.splitlines()) == 9


def test_a_cronjobs_job_names_the_cronjobs_file(tmp_path):
    """The Job a CronJob creates is judged as a Job: its problem is in the CronJob's file."""
    cron = tmp_path / "cron.yaml"
    cron.write_text(
        "kind: CronJob\nmetadata: {name: nightly}\nspec:\n  schedule: '0 1 * * *'\n"
        "  jobTemplate:\n    spec:\n      template:\n        spec:\n"
        "          restartPolicy: Always\n          containers: [{name: c, image: i}]\n"
    )
    status, out, err = check(str(cron))
    assert (status, err) == (1, "")
    lines = out.splitlines()
    assert lines and all(line.startswith(f"{cron}:1: ") for line in lines), out
    assert any(line.startswith(f"{cron}:1: Job nightly-xxxxx") for line in lines), out


def test_a_problem_of_several_objects_names_each_ones_file():
    """Two examples read as one job: its two Jobs' ranks would be one world, a problem that
    names both (``Job a, Job b: ...``), in two files."""
    status, out, err = check(str(EXAMPLES / "pserver"), str(EXAMPLES / "pserver-gpu"))
    assert (status, err) == (1, "")
    jobs = [
        EXAMPLES / "pserver" / "job-digits-ps-worker.yaml",
        EXAMPLES / "pserver-gpu" / "job-digits-ps-gpu-worker.yaml",
    ]
    head = f"{jobs[0]}:2, {jobs[1]}:2: Job digits-ps-worker, Job digits-ps-gpu-worker: 2 Jobs run"
    assert [line for line in out.splitlines() if " 2 Jobs run " in line][0].startswith(head), out


LABELLED = "  labels: {" + ", ".join(f"app.kubernetes.io/{key}: x" for key in LABELS) + "}\n"


@pytest.mark.parametrize(
    "metadata",
    [pytest.param("", id="unnamed"), pytest.param("  name: c\n", id="one name, two namespaces")],
)
def test_objects_named_alike_name_the_file_of_the_one_with_the_problem(tmp_path, metadata):
    """Two objects a problem names alike (``ConfigMap ?`` without a name, or one name in two
    namespaces), in two files, only one of them unlabelled: its problems name its file alone
    (review k368: both files were named on each line)."""
    good, bad = tmp_path / "a.yaml", tmp_path / "b.yaml"
    good.write_text(f"kind: ConfigMap\nmetadata:\n{metadata}  namespace: x\n{LABELLED}")
    bad.write_text(f"# b\nkind: ConfigMap\nmetadata:\n{metadata}  namespace: y\n")
    status, out, err = check(str(tmp_path))
    assert (status, err) == (1, "")
    name = "c" if metadata else "?"
    assert out.splitlines() == [f"{bad}:2: {line}" for line in unlabelled(name)]


def test_a_problem_naming_no_object_names_the_file_that_makes_it(monkeypatch):
    """A problem line that starts with no object's name (none of today's checks writes one, a
    new check may) names the documents that make it judged alone; one that no document makes
    alone (the job's as a whole) stays as it is (review k368: each stayed unprefixed)."""
    checked = located.manifest_problems

    def with_unnamed_lines(docs):
        secrets = sum(doc.get("kind") == "Secret" for doc in docs)
        extra = ["a Secret is written in the job"] * bool(secrets)
        return [*checked(docs), *extra, *["the job has 2 documents"] * (len(docs) == 2)]

    monkeypatch.setattr(located, "manifest_problems", with_unnamed_lines)
    docs = [("a.yaml:1", {"kind": "Secret"}), ("b.yaml:3", {"kind": "Service"})]
    problems = located.located_problems(docs)
    assert "a.yaml:1: a Secret is written in the job" in problems
    assert "the job has 2 documents" in problems
    alone = located.located_problems(docs[:1])
    assert "a.yaml:1: a Secret is written in the job" in alone
