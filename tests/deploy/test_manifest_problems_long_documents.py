"""A long document, of many values written out and no alias that expands, is no hostile one:
``distconv check-manifests`` and :func:`manifest_problems` refused a List of over
a million values (``kubectl get configmaps -o yaml`` of a namespace that holds many), which
kubectl applies, with "holds over 1000000 values once its aliases are expanded", though it had
no alias at all. The bound is on what aliases add: what no text of the bounded size holds."""

from __future__ import annotations

import pytest

from distconv.deploy.bounds import MAX_VALUES, refuse_unreadable, shape_problem

pytestmark = pytest.mark.timeout(120)

REFUSED = f"holds over {MAX_VALUES} values once its aliases are expanded"


def config_maps_list(maps: int, keys: int) -> dict:
    """A List of ``maps`` ConfigMaps (as ``yaml.safe_load`` builds it: no value shared), each
    holding ``keys`` keys."""
    items = [
        {
            "kind": "ConfigMap",
            "metadata": {"name": f"c{i}"},
            "data": {f"k{k}": "v" for k in range(keys)},
        }
        for i in range(maps)
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def test_a_list_of_over_a_million_values_written_out_is_read():
    doc = config_maps_list(MAX_VALUES // 1000 + 10, 1000)
    assert shape_problem(doc) is None
    refuse_unreadable([doc])  # manifest_problems' guard: no ValueError


def test_aliases_that_add_over_a_million_values_are_still_refused():
    """A thousand values written out once, repeated by over a thousand aliases."""
    thousand = [0] * 1000
    doc = {"kind": "ConfigMap", "data": [thousand] * (MAX_VALUES // 1000 + 10)}
    assert shape_problem(doc) == REFUSED
    with pytest.raises(ValueError, match=f"document 1 {REFUSED}"):
        refuse_unreadable([doc])
