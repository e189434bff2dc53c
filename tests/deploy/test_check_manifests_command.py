"""``distconv check-manifests PATH...``: the checks of :func:`manifest_problems` on YAML or JSON
files, folders or stdin, as an operator runs them on manifests edited by hand.

Each test runs the command as a real subprocess on real files: exit 0 and ``no problems``, exit
1 and one line per problem on stdout, exit 2 and one line on stderr for what cannot be read.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from distconv.deploy.bounds import MAX_DEPTH
from tests.child_env import child_env

pytestmark = pytest.mark.timeout(120)

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "k8s"
GRACE_LINE = "Job digits-ps-worker: terminationGracePeriodSeconds 30 < 60 s"


def in_a_child(
    *args: str, memory: int | None = None, timeout: float = 60, **options: Any
) -> subprocess.CompletedProcess:
    """``python ARGS`` in a child process run from this checkout (``DISTCONV_DEBUG`` unset),
    its output captured, with at most ``memory`` bytes of address space where given, for
    ``timeout`` s; ``options`` go to :func:`subprocess.run` (``input``, ``text``, ``cwd``)."""
    env = child_env()
    env.pop("DISTCONV_DEBUG", None)
    limited = None if memory is None else functools.partial(_limit_memory, memory)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        env=env,
        timeout=timeout,
        preexec_fn=limited,
        **options,
    )


def _limit_memory(memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def check(*args: str, stdin: bytes = b"", cwd: Path | None = None):
    """``python -m distconv check-manifests ARGS``: its exit status, stdout and stderr."""
    done = in_a_child("-m", "distconv", "check-manifests", *args, input=stdin, cwd=cwd)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def one_error(err: str) -> str:
    """The one line the command wrote on stderr, with no traceback."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def pserver(tmp_path: Path) -> Path:
    """A copy of the shipped parameter-server example."""
    return Path(shutil.copytree(EXAMPLES / "pserver", tmp_path / "pserver"))


def short_grace(folder: Path) -> Path:
    """The workers' Job of ``folder`` edited to a 30 s grace period; returns its file."""
    job = folder / "job-digits-ps-worker.yaml"
    obj = yaml.safe_load(job.read_text())
    obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
    job.write_text(yaml.safe_dump(obj))
    return job


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir()))
def test_each_shipped_example_passes_as_a_folder(example):
    assert check(str(EXAMPLES / example)) == (0, "no problems\n", "")


def test_the_shipped_files_pass_given_one_by_one_and_quiet_prints_nothing():
    files = sorted(str(p) for p in (EXAMPLES / "pserver").glob("*.yaml"))
    assert check(*files) == (0, "no problems\n", "")
    assert check("-q", *files) == (0, "", "")
    assert check("--quiet", *files) == (0, "", "")
    env = child_env()
    argv = [sys.executable, "-m", "distconv", "-q", "check-manifests", *files]
    done = subprocess.run(argv, capture_output=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")  # distconv -q too


def test_an_edited_example_fails_naming_the_problem(pserver):
    line = f"{short_grace(pserver)}:1: {GRACE_LINE}\n"  # its file, and where its document starts
    assert check(str(pserver)) == (1, line, "")
    assert check("-q", str(pserver)) == (1, line, "")  # -q hides "no problems" only


def test_every_problem_is_one_line(pserver):
    short_grace(pserver)
    job = pserver / "job-digits-ps-worker.yaml"
    job.write_text(job.read_text().replace("restartPolicy: OnFailure", "restartPolicy: Always"))
    status, out, err = check(str(pserver))
    assert (status, err) == (1, "")
    lines = out.splitlines()
    assert len(lines) == 2 and f"{job}:1: {GRACE_LINE}" in lines
    assert any("restartPolicy" in line for line in lines)


def test_a_line_break_in_a_name_stays_in_its_line(tmp_path):
    """Three problems, three lines: the name's line break is written as ``\\n``."""
    cm = tmp_path / "cm.yaml"
    cm.write_text('kind: ConfigMap\nmetadata: {name: "a\\nb\\tc"}\n')
    status, out, err = check(str(cm))
    assert (status, err) == (1, "")
    assert out.splitlines() == [
        f"{cm}:1: ConfigMap a\\nb\\tc: label app.kubernetes.io/{label} is missing"
        for label in ("name", "instance", "component")
    ]


def test_the_paths_together_are_one_job(pserver):
    """The StatefulSet alone lacks the workers and Service the others name: the check reads all
    the paths as one job, a file beside a folder too."""
    shards = pserver / "statefulset-digits-ps-pserver.yaml"
    moved = Path(shutil.move(shards, pserver.parent / shards.name))
    status, out, _ = check(str(pserver))
    assert status == 1 and out  # the workers name shards that are not there
    assert check(str(pserver), str(moved)) == (0, "no problems\n", "")


def test_several_documents_per_file_and_a_list(tmp_path, pserver):
    docs = [yaml.safe_load(p.read_text()) for p in sorted(pserver.glob("*.yaml"))]
    stream = tmp_path / "job.yaml"
    stream.write_text("---\n" + yaml.safe_dump_all(docs) + "---\n")  # empty documents: skipped
    assert check(str(stream)) == (0, "no problems\n", "")
    listed = tmp_path / "list.yml"
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    assert check(str(listed)) == (0, "no problems\n", "")


def test_json_files_and_json_on_stdin(tmp_path, pserver):
    """JSON as JSON: ``kubectl get -o json`` writes a List; ``1e3`` is a number, not the string
    YAML 1.1 reads."""
    docs = [yaml.safe_load(p.read_text()) for p in sorted(pserver.glob("*.yaml"))]
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=2)
    (tmp_path / "job.json").write_text(text)
    assert check(str(tmp_path / "job.json")) == (0, "no problems\n", "")
    assert check("-", stdin=text.encode()) == (0, "no problems\n", "")
    (tmp_path / "stream.json").write_text("\n".join(map(json.dumps, docs)))  # one after another
    assert check(str(tmp_path / "stream.json")) == (0, "no problems\n", "")
    docs[0]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
    text = json.dumps({"kind": "List", "items": docs}).replace(": 30,", ": 3e1,")
    assert ": 3e1," in text
    grace = GRACE_LINE.replace(" 30 ", " 30.0 ")  # YAML would read "3e1", no number at all
    assert check("-", stdin=text.encode()) == (1, f"<stdin>:1: {grace}\n", "")


def test_stdin(pserver):
    text = "".join(f"---\n{p.read_text()}" for p in sorted(pserver.glob("*.yaml")))
    assert check("-", stdin=text.encode()) == (0, "no problems\n", "")
    short_grace(pserver)
    text = "".join(f"---\n{p.read_text()}" for p in sorted(pserver.glob("*.yaml")))
    assert text.startswith("---\napiVersion: batch/v1\n")  # the Job first, on line 2
    assert check("-", stdin=text.encode()) == (1, f"<stdin>:2: {GRACE_LINE}\n", "")


def test_a_folder_is_read_without_subfolders_unless_recursive(tmp_path, pserver):
    """Only *.yaml, *.yml and *.json are read from a folder; its subfolders with -r."""
    (pserver / "README.md").write_text("not: [a manifest\n")
    (pserver / "notes.txt").write_text("{{ not yaml\n")
    top = tmp_path / "top"
    top.mkdir()
    (top / "extra.yaml").write_text("")
    shutil.move(pserver, top / "pserver")
    status, _, err = check(str(top))
    assert status == 2
    assert one_error(err) == (
        f"distconv check-manifests: error: no manifests in {top} (-r reads subfolders too)"
    )
    assert check("-r", str(top)) == (0, "no problems\n", "")
    assert check("--recursive", str(top / "pserver")) == (0, "no problems\n", "")


def test_a_file_named_twice_is_read_once(pserver):
    job = str(pserver / "job-digits-ps-worker.yaml")
    assert check(str(pserver), job, job) == (0, "no problems\n", "")


def test_a_yaml_error_names_the_file_line_and_column(tmp_path, pserver):
    bad = pserver / "broken.yaml"
    bad.write_text("kind: Job\nmetadata:\n  name: x\n    labels: {}\n")
    status, out, err = check(str(pserver))
    assert (status, out) == (2, "")
    # libyaml says "... not allowed in this context", PyYAML's own loader "... allowed here"
    assert one_error(err).startswith(
        f"distconv check-manifests: error: {bad}: line 4, column 11: "
        "mapping values are not allowed "
    )


def test_a_json_error_names_the_file_line_and_column(tmp_path):
    bad = tmp_path / "job.json"
    bad.write_text('{\n  "kind": "Job",\n  "metadata": {"name": "x",}\n}\n')
    status, out, err = check(str(bad))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {bad}: line 3, column 28: "
        "expecting property name enclosed in double quotes"
    )


@pytest.mark.parametrize(
    ("text", "what"),
    [("- kind: Job\n", "a list"), ("just text\n", "a string"), ("12\n", "an integer")],
)
def test_a_document_that_is_no_mapping_is_refused(tmp_path, pserver, text, what):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: ConfigMap\nmetadata: {name: c}\n---\n# a comment\n" + text)
    status, out, err = check(str(pserver), str(bad))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {bad}: document 2 (line 5) is {what}, "
        "not an object (kind, metadata, ...)"
    )


def test_a_path_that_does_not_exist(tmp_path, pserver):
    missing = tmp_path / "nowhere.yaml"
    status, out, err = check(str(pserver), str(missing))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {missing}: no such file or directory"
    )


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        (
            "bad.yaml",
            b"kind: Job\nmetadata: {name: \xff\xfe}\n",
            "byte 28 is no UTF-8 text: invalid start byte",
        ),
        (
            "ctl.yaml",
            b"kind: Job\nmetadata: {name: a\x01}\n",
            "line 2, column 19: YAML allows no character #x0001",
        ),
        (
            "date.yaml",
            b"kind: Job\n---\nkind: Job\nx: 2024-13-01\n",
            "document 2: month must be in 1..12",
        ),
        (
            "bad.json",
            b'{"kind": "\xff"}',
            "byte 11 is no UTF-8 text: invalid start byte",
        ),
    ],
)
def test_an_unreadable_file(tmp_path, name, data, why):
    bad = tmp_path / name
    bad.write_bytes(data)
    status, out, err = check(str(bad))
    assert (status, out) == (2, "")
    assert one_error(err) == f"distconv check-manifests: error: {bad}: {why}"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_file_this_user_may_not_read(tmp_path):
    bad = tmp_path / "job.yaml"
    bad.write_text("kind: Job\n")
    bad.chmod(0)
    status, _, err = check(str(bad))
    assert status == 2
    assert one_error(err) == f"distconv check-manifests: error: {bad}: permission denied"


@pytest.mark.parametrize(
    "files",
    [
        {},  # an empty folder
        {"a.yaml": "", "b.yml": "---\n---\n# nothing\n", "c.json": " \n"},
        {"list.yaml": "apiVersion: v1\nkind: List\nitems: []\n"},
    ],
)
def test_no_manifests_at_all(tmp_path, files):
    folder = tmp_path / "job"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    status, out, err = check(str(folder))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: no manifests in {folder} (-r reads subfolders too)"
    )
    status, _, err = check("-r", str(folder), "-", stdin=b"---\n")
    assert status == 2
    assert one_error(err) == (f"distconv check-manifests: error: no manifests in {folder}, <stdin>")
    assert check("-", stdin=b"")[0] == 2
    assert one_error(check("-", stdin=b"")[2]) == (
        "distconv check-manifests: error: no manifests in <stdin>"
    )


def test_no_path_is_a_usage_error():
    status, out, err = check()
    assert (status, out) == (2, "")
    assert "the following arguments are required: PATH" in err


def test_a_python_tag_builds_nothing(tmp_path):
    """The safe loader only: a tag that would run a command is a YAML error."""
    tagged = tmp_path / "tagged.yaml"
    tagged.write_text("kind: !!python/object/apply:os.system ['touch pwned']\n")
    status, out, err = check(str(tagged), cwd=tmp_path)
    assert (status, out) == (2, "")
    assert not (tmp_path / "pwned").exists()
    assert one_error(err).startswith(
        f"distconv check-manifests: error: {tagged}: line 1, column 7: could not determine a "
        "constructor for the tag"
    )


def test_anchors_and_aliases_are_read(pserver):
    """Aliases as people write them (labels shared by a pod and its selector) are fine."""
    job = pserver / "job-digits-ps-worker.yaml"
    obj = yaml.safe_load(job.read_text())
    labels = obj["metadata"]["labels"]
    obj["spec"]["template"]["metadata"]["labels"] = labels  # written as &id001 ... *id001
    text = yaml.safe_dump(obj)
    assert "*id001" in text
    job.write_text(text)
    assert check(str(pserver)) == (0, "no problems\n", "")


def test_a_billion_laughs_is_refused_at_once(tmp_path):
    """Nine lists of nine aliases, nine levels: 387 million strings once expanded, which the
    checks' copy of each manifest (walk.as_applied) would build for ever."""
    laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    laughs += [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    bomb = tmp_path / "bomb.yaml"
    head = "kind: ConfigMap\nmetadata: {name: c}\n---\nkind: ConfigMap\nmetadata: {name: d}\n"
    bomb.write_text(head + "data:\n" + "".join(f"  {line}\n" for line in laughs))
    status, out, err = check(str(bomb))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {bomb}: document 2 (line 4) holds over 1000000 "
        "values once its aliases are expanded"
    )


@pytest.mark.parametrize(
    ("template", "where"),
    [
        ("  name: {{ .Values.name }}\n", "line 3, column 10: while constructing a mapping; found "),
        ("{{- if .Values.on }}\n", "line 4, column 3: "),
    ],
)
def test_a_helm_template_is_named_as_one(tmp_path, template, where):
    """A chart's template is no YAML until rendered: the error says where, and what to run."""
    chart = tmp_path / "job.yaml"
    chart.write_text("kind: ConfigMap\nmetadata:\n" + template + "  labels: {}\n")
    status, out, err = check(str(chart))
    assert (status, out) == (2, "")
    line = one_error(err)
    assert line.startswith(f"distconv check-manifests: error: {chart}: {where}"), line
    assert line.endswith(
        " (a template? check what it renders: helm template ... | distconv check-manifests -)"
    )


def test_a_result_that_cannot_be_written_is_exit_2_not_1(tmp_path):
    """Exit 1 says "the manifests have problems": a full disk or a closed stdout lost the
    result, manifests with no problem included, and must say so, with exit 2."""
    env = child_env()
    argv = [sys.executable, "-m", "distconv", "check-manifests", str(EXAMPLES / "pserver")]
    prog = "distconv check-manifests: error: cannot write the result to stdout"
    with open("/dev/full", "wb") as full:
        done = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, env=env, timeout=60)
    assert (done.returncode, one_error(done.stderr.decode())) == (
        2,
        f"{prog}: no space left on device",
    )
    closed = subprocess.run(
        ["sh", "-c", '"$@" >&-', "sh", *argv], capture_output=True, env=env, timeout=60
    )
    assert (closed.returncode, one_error(closed.stderr.decode())) == (
        2,
        f"{prog}: stdout is closed",
    )


@pytest.mark.parametrize("stdout", ["> /dev/full", ">&-"])
def test_quiet_with_no_problem_needs_no_stdout(stdout):
    """``--quiet`` and no problem: nothing is written, so a full or closed stdout loses no
    result, and the status is 0 (it was 2, "cannot write the result", for a write of '')."""
    env = child_env()
    argv = [sys.executable, "-m", "distconv", "check-manifests", "-q", str(EXAMPLES / "pserver")]
    done = subprocess.run(
        ["sh", "-c", f'"$@" {stdout}', "sh", *argv], capture_output=True, env=env, timeout=60
    )
    assert (done.returncode, done.stderr.decode()) == (0, "")


def test_a_problem_stdout_cannot_encode_is_exit_2(pserver):
    """A problem naming ``digits-ps-wörker`` that an ASCII stdout cannot take is no result."""
    job = pserver / "job-digits-ps-worker.yaml"
    job.write_text(job.read_text().replace("name: digits-ps-worker", "name: digits-ps-wörker"))
    env = child_env(PYTHONIOENCODING="ascii")
    argv = [sys.executable, "-m", "distconv", "check-manifests", str(job)]
    done = subprocess.run(argv, capture_output=True, env=env, timeout=60)
    assert (done.returncode, done.stdout) == (2, b"")
    assert one_error(done.stderr.decode()).startswith(
        "distconv check-manifests: error: cannot write the result to stdout: its encoding ascii "
        "cannot hold '\\xf6'"
    )


def merge_levels(levels: int) -> str:
    """A ConfigMap whose data ``m<i>`` merges ``m<i-1>`` nine times (``<<: [*m0, *m0, ...]``),
    for ``i`` up to ``levels``; ``m0`` holds nine keys."""
    lines = ["m0: &m0 {k0: v, k1: v, k2: v, k3: v, k4: v, k5: v, k6: v, k7: v, k8: v}"]
    lines += [
        f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 9)}]}}" for i in range(1, levels + 1)
    ]
    return "kind: ConfigMap\nmetadata: {name: c}\ndata:\n" + "".join(f"  {x}\n" for x in lines)


def test_merge_keys_repeated_through_aliases_load_at_once(tmp_path):
    """Nine levels of nine merges: PyYAML's merge appended every repeat, 9**10 pairs (5 GB,
    past a minute) for mappings of nine keys, before any limit could measure the document.
    Under a 1 GiB address space the command must read it, and judge it as any ConfigMap."""
    bomb = tmp_path / "merge.yaml"
    bomb.write_text(merge_levels(9))
    limit = 1 << 30
    code = (
        "import resource, runpy, sys; "
        f"resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit})); "
        "sys.argv[0] = 'distconv'; "
        "runpy.run_module('distconv', run_name='__main__')"
    )
    env = child_env()
    argv = [sys.executable, "-c", code, "check-manifests", str(bomb)]
    done = subprocess.run(argv, capture_output=True, env=env, timeout=30)
    assert (done.returncode, done.stderr.decode()) == (1, "")
    labels = ("name", "instance", "component")
    assert done.stdout.decode().splitlines() == [
        f"{bomb}:1: ConfigMap c: label app.kubernetes.io/{label} is missing" for label in labels
    ]


def test_merge_keys_mean_what_pyyaml_makes_of_them(tmp_path):
    """Dropping the repeats changes nothing the document says: a key of the mapping itself wins
    over a merged one, the first merged mapping over the later, and each key keeps its place
    (PyYAML's merging up to 6.0.3: :class:`Merging`; 6.0.4 orders merged keys otherwise)."""
    from distconv.deploy.check_command import read_manifests
    from tests.deploy.test_check_manifests_merge_keys import Merging

    text = merge_levels(2) + "  o: {<<: [{x: 1, y: 2}, {x: 9, w: 4}], y: 7, y: 8, 1: a, 0x1: b}\n"
    (tmp_path / "merge.yaml").write_text(text)
    (doc,) = read_manifests([str(tmp_path / "merge.yaml")])
    merged = yaml.load(text, Loader=Merging)  # noqa: S506 - a safe loader
    assert doc == merged
    assert [list(v) for v in doc["data"].values()] == [list(v) for v in merged["data"].values()]


def test_a_document_that_holds_itself_is_refused(tmp_path):
    """``&a [*a]``: PyYAML builds a list that holds itself, which the checks would walk for
    ever; Go's YAML (kubectl's) refuses it."""
    loop = tmp_path / "loop.yaml"
    loop.write_text("kind: ConfigMap\nmetadata: {name: c}\ndata: &a {x: [*a]}\n")
    status, out, err = check(str(loop))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {loop}: document 1 (line 1) holds itself (an alias "
        "inside its own anchor)"
    )


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_deep_nesting_is_an_error_not_a_crash(tmp_path, depth):
    """100000 levels overflowed the C stack of libyaml's loader (a segfault, -11); past
    kubectl's own bound (10000 levels) a document is refused, YAML or JSON, before it is built."""
    deep = tmp_path / "deep.yaml"
    deep.write_text("kind: ConfigMap\n---\nkind: Job\nspec: " + "[" * depth + "]" * depth + "\n")
    status, out, err = check(str(deep))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {deep}: document 2 (line 3) is nested deeper than "
        f"{MAX_DEPTH} levels"
    )
    nested = "[" * depth + "]" * depth  # after a string that holds brackets, which nest none
    deep.with_suffix(".json").write_text(f'{{"kind": "ConfigMap"}}\n{{"a": "[[", "b": {nested}}}')
    status, out, err = check(str(deep.with_suffix(".json")))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {deep.with_suffix('.json')}: document 2 (line 2) is "
        f"nested deeper than {MAX_DEPTH} levels"
    )


def test_declaring_the_command_imports_neither_yaml_nor_the_checks():
    """``distconv train`` builds the same parser: the check's modules load when it runs."""
    code = (
        "import sys; from distconv.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('yaml', 'distconv.deploy', 'json') if m in sys.modules))"
    )
    env = child_env()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert (
        "check-manifests"
        in subprocess.run(
            [sys.executable, "-m", "distconv", "--help"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        ).stdout
    )
    assert "yaml" not in done.stdout and "distconv.deploy" not in done.stdout
