"""The file of each problem is found in time linear in the problems: each line
was compared with the name of every object read, and each document's lines, so a List of 4000
ConfigMaps (``kubectl get configmaps -o yaml``), judged in 0.2 s, took 12 s more to be placed,
8000 a minute."""

from __future__ import annotations

import pytest

from distconv.deploy.located import located_problems

pytestmark = pytest.mark.timeout(10)


def test_the_problems_of_a_long_list_are_placed_in_time():
    count = 8000
    items = [{"kind": "ConfigMap", "metadata": {"name": f"c{i}"}} for i in range(count)]
    listed = {"apiVersion": "v1", "kind": "List", "items": items}
    problems = located_problems([("all.yaml:1", listed), ("other.yaml:1", {"kind": "Secret"})])
    assert len(problems) == 3 * count + 3
    assert problems[-4].startswith(f"all.yaml:1: ConfigMap c{count - 1}: label ")
    assert problems[-1].startswith("other.yaml:1: Secret ?: label ")


def test_many_documents_are_placed_in_time():
    count = 8000
    sources = [
        (f"f.yaml:{i}", {"kind": "ConfigMap", "metadata": {"name": f"c{i}"}}) for i in range(count)
    ]
    problems = located_problems(sources)
    assert problems[-1].startswith(f"f.yaml:{count - 1}: ConfigMap c{count - 1}: label ")
