"""``expand``, the one reading of a ``$(VAR)`` in the checks, follows the kubelet's rules
(k8s.io/kubernetes third_party/forked/golang/expansion): ``$(NAME)`` from the container's env,
``$$`` a literal ``$`` in the same left-to-right pass, a reference to no variable (or one not
closed) left as written, an env value filled in from the variables defined before it only."""

from __future__ import annotations

import pytest

from distconv.deploy.check_shards import _is_filled, expand

pytestmark = pytest.mark.timeout(30)

CONTAINER = {
    "env": [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "$(A)-$$(A)-$(Z)"},  # A before it, Z nowhere
        {"name": "C", "value": "$(D)"},  # D defined after C: left as written
        {"name": "D", "value": "4"},
        {"name": "P", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "E"},  # no value: the empty string
    ]
}


@pytest.mark.parametrize(
    "written, passed",
    [
        ("$(A)", "1"),
        ("x$(A)y$(A)", "x1y1"),
        ("$$(A)", "$(A)"),  # escaped: the process sees the reference itself
        ("$$$(A)", "$1"),
        ("$$", "$"),
        ("$x", "$x"),  # no reference: both characters kept
        ("a$", "a$"),
        ("$(A", "$(A"),  # not closed
        ("$()", "$()"),
        ("$(A$(B))", "$(A$(B))"),  # the name is "A$(B", which no variable has
        ("$(Z)", "$(Z)"),  # no such variable: left as written
        ("$(B)", "1-$(A)-$(Z)"),  # its value filled in once, from A before it
        ("$(C)", "$(D)"),
        ("$(D)", "4"),
        ("[$(E)]", "[]"),
    ],
)
def test_expand_follows_the_kubelets_rules(written, passed):
    assert expand(written, CONTAINER) == passed


def test_a_value_only_the_cluster_knows_is_a_stand_in():
    assert _is_filled(expand("--name=$(P)", CONTAINER))
    assert _is_filled(expand("$(X)", {"envFrom": [{"configMapRef": {"name": "m"}}]}))
    assert _is_filled(expand("$(WEB_SERVICE_PORT)", {}))  # a Service's variable
