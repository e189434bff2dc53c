"""``manifest_problems`` called directly on ``yaml.safe_load`` output of a hostile
file: an alias bomb or a document that holds itself is a clear ``ValueError``, at once, not a
``RecursionError``, a hang or all of the memory. ``distconv check-manifests`` refuses both before
the checks; a program that loads YAML itself did not."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from distconv.deploy.bounds import MAX_DEPTH
from distconv.deploy.check import manifest_problems
from tests.deploy.test_check_manifests_command import in_a_child

pytestmark = pytest.mark.timeout(120)

BOMB = "kind: ConfigMap\nmetadata: {name: d}\ndata:\n" + "".join(
    f"  {c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
).replace("  b:", '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n  b:', 1)
#: what a caller's own copy of the checks may take: the bomb expanded takes tens of GB
MEMORY = 2 << 30


def checked_in_a_child(text: str) -> subprocess.CompletedProcess[str]:
    """``manifest_problems([yaml.safe_load(text)])`` in a child process with 2 GiB of memory
    and 30 s: what it printed (its error's type and message), or how it died."""
    code = (
        "import sys, yaml\nfrom distconv.deploy.check import manifest_problems\n"
        "try:\n    print(manifest_problems([yaml.safe_load(sys.stdin.read())]))\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    return in_a_child("-c", code, input=text, text=True, timeout=30, memory=MEMORY)


def test_a_billion_laughs_is_a_value_error_at_once():
    """387 million strings once expanded: refused by their count, not built."""
    done = checked_in_a_child(BOMB)
    assert done.stdout == (
        "ValueError document 1 holds over 1000000 values once its aliases are expanded\n"
    ), done.stderr[-2000:]


def test_a_document_that_holds_itself_is_a_value_error():
    doc = yaml.safe_load("kind: ConfigMap\nmetadata: {name: c}\ndata: &a {x: [*a]}\n")
    with pytest.raises(ValueError, match=r"^document 1 holds itself \(an alias inside its own"):
        manifest_problems([doc])


def test_too_deep_a_document_is_a_value_error():
    doc: dict = {"kind": "ConfigMap", "metadata": {"name": "c"}}
    inner = doc
    for _ in range(MAX_DEPTH + 50):
        inner["x"] = inner = {}
    with pytest.raises(ValueError, match=rf"^document 1 is nested deeper than {MAX_DEPTH} levels$"):
        manifest_problems([doc])


def test_shared_values_within_the_bounds_are_checked_as_written():
    """An alias is no problem in itself: a job whose pods share one label mapping is checked."""
    labels = {"app.kubernetes.io/name": "x"}
    docs = [
        {"kind": "ConfigMap", "metadata": {"name": "a", "labels": labels}},
        {"kind": "ConfigMap", "metadata": {"name": "b", "labels": labels}},
    ]
    missing = ("instance", "component")
    assert manifest_problems(docs) == [
        f"ConfigMap {name}: label app.kubernetes.io/{label} is missing"
        for name in "ab"
        for label in missing
    ]
