"""``distconv check-manifests`` names a file whose name does not print (a line break, a
control character, a byte of no UTF-8) as the ``$'...'`` shell word the training command's
errors use, which pastes back as the same path: ``a\\nb.yaml``, as it was
shown, named another file."""

from __future__ import annotations

import subprocess

import pytest

from tests.deploy.test_check_manifests_command import check, one_error

pytestmark = pytest.mark.timeout(60)

LABEL = "app.kubernetes.io/name"
_NAMES = [
    ("a\nb\tc.yaml", "a\\nb\\tc.yaml"),
    ("esc\x1b[31m.yaml", "esc\\x1b[31m.yaml"),
    ("it's\x7f.yaml", "it\\'s\\x7f.yaml"),
    ("no-utf8-\udcff.yaml", "no-utf8-\\xff.yaml"),
]


def _pastes_back(folder, word: str) -> bool:
    """Whether bash, given ``word`` in ``folder``, finds the file."""
    return subprocess.run(["bash", "-c", f"test -f {word}"], cwd=folder).returncode == 0


@pytest.mark.parametrize(("name", "escaped"), _NAMES, ids=range(len(_NAMES)))
def test_a_problem_line_names_the_file_as_a_shell_word(tmp_path, name, escaped):
    (tmp_path / name).write_text("kind: ConfigMap\nmetadata: {name: c}\n")
    status, out, err = check(".", cwd=tmp_path)
    assert (status, err) == (1, "")
    quoted = f"$'./{escaped}'"  # the path as found, whole
    assert (
        out.splitlines()[0] == f"{quoted}:1: ConfigMap c: label app.kubernetes.io/name is missing"
    )
    assert _pastes_back(tmp_path, quoted)


@pytest.mark.parametrize(("name", "escaped"), _NAMES[:2], ids=range(2))
def test_an_error_names_it_so_too(tmp_path, name, escaped):
    (tmp_path / name).write_text("kind: [\n")
    status, out, err = check(".", cwd=tmp_path)
    assert (status, out) == (2, "")
    assert one_error(err).startswith(f"distconv check-manifests: error: $'./{escaped}': line 2,")
    status, out, err = check(name, cwd=tmp_path)  # given by name, as the shell word pastes it
    assert one_error(err).startswith(f"distconv check-manifests: error: $'{escaped}': line 2,")
