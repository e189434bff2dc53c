"""``distconv check-manifests`` writes one line on stderr for what it cannot read, whatever the
file's name: a line break or a tab in a name (a folder's file, which nobody typed)
is written as ``\\n``, ``\\t``, as in the problem lines, not as two lines of error; the name is
written as a ``$'...'`` shell word."""

from __future__ import annotations

import pytest

from tests.deploy.test_check_manifests_command import check, one_error

pytestmark = pytest.mark.timeout(120)


def test_an_error_naming_a_file_with_a_line_break_is_one_line(tmp_path):
    (tmp_path / "a\nb\tc.yaml").write_text("kind: [\n")
    status, out, err = check(str(tmp_path))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: $'{tmp_path}/a\\nb\\tc.yaml': line 2, column 1: while "
        "parsing a flow node; did not find expected node content"
    )


def test_its_problem_lines_name_it_so_too(tmp_path):
    (tmp_path / "a\nb.yaml").write_text("kind: ConfigMap\nmetadata: {name: c}\n")
    status, out, err = check(str(tmp_path))
    assert (status, err) == (1, "")
    assert out.splitlines()[0] == (
        f"$'{tmp_path}/a\\nb.yaml':1: ConfigMap c: label app.kubernetes.io/name is missing"
    )
