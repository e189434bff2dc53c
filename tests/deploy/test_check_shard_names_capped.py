"""``distconv check-manifests`` on the shards' names: the DNS names and the ``--pservers`` a line
shows are capped, a wrong ``--pservers`` is named however many shards there are, and the
shards' names are made as written."""

from __future__ import annotations

import time

import pytest

from distconv.deploy.check import manifest_problems
from distconv.deploy.check_pservers import ShardNames
from distconv.deploy.render import render_manifests
from tests.deploy.test_counts import PSERVER, _problems_with

pytestmark = pytest.mark.timeout(30)


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
