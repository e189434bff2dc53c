"""``distconv check-manifests``: review k395's findings, each shown by a test that failed
before its fix."""

from __future__ import annotations

import codecs
import os
import threading
import time

import pytest

from distconv.deploy import check_command
from distconv.deploy.check import manifest_problems
from distconv.deploy.check_pservers import ShardNames
from distconv.deploy.counts import count, counted, known_count
from distconv.deploy.render import render_manifests
from tests.deploy.test_counts import PSERVER, _problems_with

pytestmark = pytest.mark.timeout(30)

CONFIG_MAP = b"kind: ConfigMap\nmetadata:\n  name: c\n"


def test_a_pipe_whose_writer_is_slow_to_start_is_read_not_refused(monkeypatch):
    """``<(kubectl kustomize ...)`` is a pipe its writer holds open from the start, and may
    write nothing for longer than ``FIFO_WAIT_S`` (remote bases fetched, charts rendered): it
    is read as stdin is. It was refused as ``a FIFO nothing wrote to``, which was false."""
    monkeypatch.setattr(check_command, "FIFO_WAIT_S", 0.1)
    reader, writer = os.pipe()

    def write_late() -> None:
        time.sleep(0.5)  # five times the wait, the writer open all along
        os.write(writer, CONFIG_MAP)
        os.close(writer)

    late = threading.Thread(target=write_late, daemon=True)
    late.start()
    try:
        sources = check_command.read_sources([f"/dev/fd/{reader}"])
    finally:
        late.join(5)
        os.close(reader)
    assert sources == [(f"/dev/fd/{reader}:1", {"kind": "ConfigMap", "metadata": {"name": "c"}})]


@pytest.mark.parametrize(
    ("kind", "field"),
    [("StatefulSet", "replicas"), ("Job", "completions"), ("Job", "parallelism")],
)
@pytest.mark.parametrize("value", [2**31, 10**26, 3e9])
def test_a_count_past_int32_is_the_one_problem(kind, field, value):
    """The API server stores each count as an int32 and refuses ``completions:
    99999999999999999999999999``: it passed with no problem, and was compared with the flags
    as if it were the count (``--num-shards 2 but the StatefulSet has ... replicas``)."""
    name = {"StatefulSet": "ps-pserver", "Job": "ps-worker"}[kind]
    problems = _problems_with(PSERVER, kind, (field,), value)
    assert problems == [
        f"{kind} {name}: {field} must be at most 2147483647 (an int32), got {value!r}"
    ]


_PAST_INT32 = "must be at most 2147483647 (an int32)"


@pytest.mark.parametrize(("value", "taken"), [(2**31 - 1, True), (2**31, False)])
def test_the_largest_int32_count_is_taken_and_the_next_by_no_check(value, taken):
    """2147483647 itself is a count the API server takes: no problem about its range, and each
    reader of a count (count, known_count, counted) takes it. 2147483648 is named once and
    taken by none (count gave it to the probe-port check, which echoed it). It only guarded the
    boundary before, passing whatever any reader took."""
    problems = _problems_with(PSERVER, "Job", ("parallelism",), value)
    ranged = [p for p in problems if "int32" in p or "must be an integer" in p]
    assert ranged == ([] if taken else [f"Job ps-worker: parallelism {_PAST_INT32}, got {value}"])
    spec = {"parallelism": value}
    read = (count(spec, "parallelism", 1), known_count(spec, "parallelism", 1))
    expected = ((value, value), True) if taken else ((1, None), False)
    assert (read, counted(spec, "parallelism")) == expected


@pytest.mark.parametrize("codec", ["utf-32-le", "utf-32-be"])
def test_utf32_text_is_refused_by_its_name(tmp_path, codec):
    """A UTF-32 file (its byte order mark first) was read as UTF-16 (``FF FE`` starts both
    marks) or as UTF-8, and refused as ``YAML allows no character #x0000``, which named no
    encoding. kubectl reads no UTF-32: the line says that is what the file is."""
    path = tmp_path / "job.yaml"
    path.write_bytes(codecs.BOM_UTF32_LE if codec.endswith("le") else codecs.BOM_UTF32_BE)
    with path.open("ab") as file:
        file.write(CONFIG_MAP.decode().encode(codec))
    with pytest.raises(check_command.ManifestReadError) as refused:
        check_command.read_sources([str(path)])
    assert (
        str(refused.value) == f"{path}: UTF-32 text (its byte order mark): kubectl reads no UTF-32"
    )


def _dns_lines(problems: list[str]) -> list[str]:
    return [p for p in problems if "is not the shards' DNS names" in p]


def test_the_shards_dns_names_a_line_shows_are_capped():
    """A line that lists the shards' DNS names showed every one: 200000 shards made a line of
    megabytes. It shows five and counts the rest, as a line's places are counted."""
    problems = _problems_with(PSERVER, "StatefulSet", ("replicas",), 1000)
    names = ",".join(f"ps-pserver-{i}.ps-pserver:5555" for i in range(5))
    given = "'ps-pserver-0.ps-pserver:5555,ps-pserver-1.ps-pserver:5555'"
    assert _dns_lines(problems) == [
        f"Job ps-worker: {source} {given} is not the shards' DNS names '{names}' and 995 more"
        for source in ("--pservers", "DISTCONV_PSERVERS")
    ]


def test_a_long_pservers_a_line_shows_is_capped_too():
    """The ``--pservers`` a worker gives is shown the same way: six names, five shown."""
    objs = render_manifests(**PSERVER, train_args=["--epochs", "2"])
    (job,) = [o for o in objs if o["kind"] == "Job"]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    given = ",".join(f"x-{i}:1" for i in range(6))
    args[args.index("--pservers") + 1] = given
    (line,) = [p for p in _dns_lines(manifest_problems(objs)) if "--pservers" in p]
    assert line.startswith("Job ps-worker: --pservers 'x-0:1,x-1:1,x-2:1,x-3:1,x-4:1' and 1 more ")


def test_a_wrong_pservers_is_named_however_many_shards_there_are():
    """Past 200000 replicas (MAX_LISTED_SHARDS), 55376cee compared no ``--pservers`` at all, so
    a worker's list of two names for 300000 shards passed unnamed. The names are made as they
    are compared: a list of another length is told apart by its length, at once."""
    started = time.monotonic()
    problems = _problems_with(PSERVER, "StatefulSet", ("replicas",), 300_000)
    assert time.monotonic() - started < 5
    names = ",".join(f"ps-pserver-{i}.ps-pserver:5555" for i in range(5))
    assert [line.split(" DNS names ")[1] for line in _dns_lines(problems)] == [
        f"'{names}' and 299995 more"
    ] * 2


def test_the_shards_names_are_made_as_written():
    """Each name is the StatefulSet's name, ordinal, service and port as written, braces too
    (no format string), by index, from the end and by slice."""
    names = ShardNames("a{0}", "s", 5555, 3)
    assert list(names) == ["a{0}-0.s:5555", "a{0}-1.s:5555", "a{0}-2.s:5555"]
    assert (len(names), names[-1], names[1:]) == (3, "a{0}-2.s:5555", list(names)[1:])
    with pytest.raises(IndexError):
        names[3]
