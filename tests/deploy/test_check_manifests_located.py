"""Each problem line of ``distconv check-manifests`` names the file its object is written in,
and the line its document starts on: ``job.yaml:12: Job x: ...``. With several
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
    assert out.splitlines() == [f"<stdin>:1, {twice}:1: {line}" for line in unlabelled("c")]


def test_a_problem_many_files_make_is_printed_once_naming_a_few(tmp_path):
    """The same line made by each of many files is printed once, naming the first
    ``MAX_PLACES`` files and counting the rest: 2000 unnamed ConfigMaps printed
    each of their 3 lines 2000 times, each naming all 2000 files (161 MB)."""
    sources = [(f"f{i}.yaml:1", {"kind": "ConfigMap"}) for i in range(2000)]
    first = ", ".join(f"f{i}.yaml:1" for i in range(5)) + " and 1995 more documents"
    assert located.MAX_PLACES == 5
    assert located.located_problems(sources) == [f"{first}: {line}" for line in unlabelled("?")]


def test_a_problem_made_by_a_few_files_names_them_all(tmp_path):
    """Up to ``MAX_PLACES`` files are each named, once: the line is not printed per file."""
    for name in "abcde":
        (tmp_path / f"{name}.yaml").write_text("kind: ConfigMap\n")
    status, out, err = check(str(tmp_path))
    assert (status, err) == (1, "")
    places = ", ".join(f"{tmp_path / name}.yaml:1" for name in "abcde")
    assert out.splitlines() == [f"{places}: {line}" for line in unlabelled("?")]


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
        EXAMPLES / "pserver" / "statefulset-digits-ps-pserver.yaml",
        EXAMPLES / "pserver-gpu" / "job-digits-ps-gpu-worker.yaml",
        EXAMPLES / "pserver-gpu" / "statefulset-digits-ps-gpu-pserver.yaml",
    ]
    # the shards it names after (StatefulSet ..., ...), each in its own file, are named too
    places = ", ".join(f"{path}:2" for path in jobs)
    head = f"{places}: Job digits-ps-worker, Job digits-ps-gpu-worker: 2 Jobs run"
    assert [line for line in out.splitlines() if " 2 Jobs run " in line][0].startswith(head), out


LABELLED = "  labels: {" + ", ".join(f"app.kubernetes.io/{key}: x" for key in LABELS) + "}\n"


@pytest.mark.parametrize(
    "metadata",
    [pytest.param("", id="unnamed"), pytest.param("  name: c\n", id="one name, two namespaces")],
)
def test_objects_named_alike_name_the_file_of_the_one_with_the_problem(tmp_path, metadata):
    """Two objects a problem names alike (``ConfigMap ?`` without a name, or one name in two
    namespaces), in two files, only one of them unlabelled: its problems name its file alone
    (both files were named on each line)."""
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
    alone (the job's as a whole) stays as it is (each stayed unprefixed)."""
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


SHARDS, WORKERS, SERVICE = (
    "statefulset-digits-ps-pserver.yaml",
    "job-digits-ps-worker.yaml",
    "service-digits-ps-pserver.yaml",
)


@pytest.mark.parametrize(
    ("edited", "old", "new", "line", "files"),
    [
        pytest.param(
            SHARDS,
            '- "--workers"\n            - "4"',
            '- "--workers"\n            - "3"',
            "StatefulSet digits-ps-pserver: --workers 3 but Job digits-ps-worker runs 4 ranks",
            {SHARDS, WORKERS},
            id="--workers",
        ),
        pytest.param(
            WORKERS,
            "DISTCONV_JOB_ID\n              value: digits-ps",
            "DISTCONV_JOB_ID\n              value: other",
            "Job digits-ps-worker container worker: job id 'other'",
            {SHARDS, WORKERS},
            id="job id",
        ),
        pytest.param(
            SERVICE,
            "publishNotReadyAddresses: true",
            "publishNotReadyAddresses: false",
            "StatefulSet digits-ps-pserver: Service 'digits-ps-pserver' must set",
            {SHARDS, SERVICE},
            id="quoted Service",
        ),
    ],
)
def test_a_problem_naming_objects_after_its_first_names_each_ones_file(
    pserver, edited, old, new, line, files
):
    """A problem of two objects in two files that starts by naming one of them and names the
    other further on (``... but Job a runs 4 ranks``, ``Service 'a'``) names both files
    (only the first object's file was named)."""
    path = pserver / edited
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    status, out, err = check(str(pserver))
    assert (status, err) == (1, "")
    found = [problem for problem in out.splitlines() if line in problem]
    assert len(found) == 1, out
    places = found[0].split(f": {line}", 1)[0].split(", ")
    assert {place.rsplit(":", 1)[0] for place in places} == {str(pserver / f) for f in files}


def test_an_object_a_line_only_mentions_names_no_file_where_another_makes_it_alone(monkeypatch):
    """A line one document makes alone names its file only, though its words name an object
    of another file too (``ConfigMap a: ... ConfigMap b``): that one is no part of it."""
    checked = located.manifest_problems

    def with_a_mention(docs):
        mine = any(doc.get("metadata", {}).get("name") == "a" for doc in docs)
        return [*checked(docs), *["ConfigMap a: is not like ConfigMap b"] * mine]

    monkeypatch.setattr(located, "manifest_problems", with_a_mention)
    docs = [("a.yaml:1", {"kind": "ConfigMap", "metadata": {"name": "a"}})]
    docs.append(("b.yaml:1", {"kind": "ConfigMap", "metadata": {"name": "b"}}))
    assert "a.yaml:1: ConfigMap a: is not like ConfigMap b" in located.located_problems(docs)


def _unlabelled_places(sources: list) -> set[str]:
    """The places each line of the problems of ``sources`` names (all lines alike)."""
    lines = located.located_problems(sources)
    return {line.split(": ConfigMap", 1)[0] for line in lines}


def test_the_count_after_the_places_names_what_it_counts():
    """Seven unnamed ConfigMaps in one file are seven documents, not seven files: the line names
    five and says ``2 more documents`` (it said ``2 more`` where the docs said files), and one
    left over is ``1 more document``."""
    many = [(f"all.yaml:{2 * i + 1}", {"kind": "ConfigMap"}) for i in range(7)]
    named = ", ".join(f"all.yaml:{2 * i + 1}" for i in range(5))
    assert _unlabelled_places(many) == {f"{named} and 2 more documents"}
    assert _unlabelled_places(many[:6]) == {f"{named} and 1 more document"}
    assert _unlabelled_places(many[:5]) == {named}
