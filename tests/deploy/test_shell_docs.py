"""docs/kubernetes.md says which shell strings the checks read.

Its one example of a rank in a shell's command, ``sh -c "cd /x; distconv train ..."``, is the
case whose flags the checks leave alone; the docs now say so, and which strings are read. This
holds the docs' two examples to :func:`distconv.deploy.manifest_problems`.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

KUBERNETES = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"
OUT = "--out /opt/x"  # on the read-only root: refused where the flags are read


def _problems(script_before: str) -> list[str]:
    """The problems of a rendered job whose worker runs its train args, then ``OUT``, behind
    ``script_before`` in an ``sh -c`` string."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    script = f"{script_before}{shlex.join(container.pop('args'))} {OUT}"
    container["command"] = ["sh", "-c", script]
    return manifest_problems(objs)


def test_the_docs_examples_of_shell_strings_are_read_as_they_say():
    text = " ".join(KUBERNETES.read_text(encoding="utf-8").split())
    assert f'`sh -c "cd /x; distconv train {OUT}"` passes' in text
    assert re.search(r'`sh -c "exec distconv train \.\.\."`, with or\s+without `exec`', text)
    assert _problems("cd /x; ") == []
    for before in ("exec ", "", "DISTCONV_JOB_ID=j exec "):
        assert any("--out /opt/x is on no writable volume" in p for p in _problems(before)), before
