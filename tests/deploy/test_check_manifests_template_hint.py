"""The Helm-template hint on a YAML error of ``distconv check-manifests``: shown
where the file holds a template action YAML reads as YAML (``name: {{ .Values.name }}``,
``{{- if ... }}``), not for a plain manifest whose ``{{`` stands in a quoted string, a comment
or a block scalar's text (a shell's ``'{{.Names}}'``, Alertmanager's templates in a
ConfigMap), where the hint sent its reader to Helm for an unrelated typo."""

from __future__ import annotations

import pytest

from tests.deploy.test_check_manifests_command import check, one_error

pytestmark = pytest.mark.timeout(120)

HINT = " (a template? check what it renders: helm template ... | distconv check-manifests -)"
#: a typo no template made: a second ``:`` in a plain value, line 4
TYPO = "  namespace: a: b\n"


def error_line(tmp_path, text: str) -> str:
    """The one error line ``check-manifests`` writes for ``text`` in a file (exit 2)."""
    path = tmp_path / "job.yaml"
    path.write_text(text)
    status, out, err = check(str(path))
    assert (status, out) == (2, "")
    return one_error(err)


def assert_typo_alone(line: str) -> None:
    """``line`` names the typo (libyaml's words or PyYAML's), and no template."""
    assert ": line 4, column 15: mapping values are not allowed " in line, line
    assert not line.endswith(HINT), line


@pytest.mark.parametrize(
    "plain",
    [
        '  labels: {app: x}\n  annotations: {fmt: "{{.Names}}"}\n',
        "  annotations: {fmt: '{{ .ID }} it''s'}\n",
        "  # rendered from {{ .Values.name }} once\n",
        "  annotations:\n    text: |\n      {{ range .Alerts }}{{ .Labels.x }}\n      {{ end }}\n",
        "  annotations:\n    - >-\n      {{ .CommonLabels }}\n",
    ],
    ids=["double-quoted", "single-quoted", "comment", "block scalar", "folded list item"],
)
def test_a_plain_manifest_with_a_hidden_brace_pair_gets_no_hint(tmp_path, plain):
    line = error_line(tmp_path, "kind: ConfigMap\nmetadata:\n  name: c\n" + TYPO + plain)
    assert_typo_alone(line)


@pytest.mark.parametrize(
    "template",
    [
        "  name: {{ .Values.name }}\n",
        "{{- if .Values.on }}\n  name: c\n{{- end }}\n",
        '  name: "{{ .Values.name }}"\n  labels: {{- include "x.labels" . | nindent 4 }}\n',
        "  annotations:\n    text: |\n      {{ .Values.text }}\n  labels: {{ .Values.l }}\n",
        "  image: don't/{{ .Values.image }}:'x'\n  name: a: b\n",
    ],
    ids=["value", "action line", "quoted and unquoted", "after a block scalar", "apostrophe"],
)
def test_a_template_gets_the_hint(tmp_path, template):
    line = error_line(tmp_path, "kind: ConfigMap\nmetadata:\n" + template)
    assert line.endswith(HINT), line


def test_a_plain_typo_gets_no_hint(tmp_path):
    assert_typo_alone(error_line(tmp_path, "kind: ConfigMap\nmetadata:\n  name: c\n" + TYPO))
