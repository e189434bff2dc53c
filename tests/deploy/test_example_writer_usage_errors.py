"""``python -m distconv.deploy a b`` and ``python -m distconv.deploy -x`` printed the usage
line alone, exit 2, with no ``error:`` line saying what was wrong (a blank FOLDER had one):
each now says which arguments it refused, and writes nothing."""

from __future__ import annotations

import pytest

from tests.deploy.test_example_writer import _write

pytestmark = pytest.mark.timeout(60)

USAGE = "usage: python -m distconv.deploy [FOLDER]  (rewrites the example manifests; default k8s)"


@pytest.mark.parametrize(
    "args, said",
    [
        (["a", "b"], "one FOLDER at most, got 2: 'a' 'b'"),
        (["k8s", "--help"], "one FOLDER at most, got 2: 'k8s' '--help'"),
        (["-x"], "unknown option '-x' (the only options are -h and --help; a FOLDER whose "
                 "name starts with '-' is written ./-x)"),
        (["--out"], "unknown option '--out' (the only options are -h and --help; a FOLDER "
                    "whose name starts with '-' is written ./--out)"),
    ],
)  # fmt: skip
def test_a_refused_argument_is_named_under_the_usage(tmp_path, args, said):
    result = _write(tmp_path, *args)
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr.splitlines() == [USAGE, f"python -m distconv.deploy: error: {said}"]
    assert list(tmp_path.iterdir()) == []


def test_the_folder_the_error_names_is_written(tmp_path):
    """``./-x``, as the line says, is a folder: the examples go there."""
    result = _write(tmp_path, "./-x")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "-x").iterdir()) == [
        "mpijob", "mpijob-gpu", "pserver", "pserver-gpu"
    ]  # fmt: skip
