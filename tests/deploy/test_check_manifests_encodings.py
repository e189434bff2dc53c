"""``distconv check-manifests`` reads what ``kubectl apply -f`` reads: kubectl's
FileVisitor decodes through ``unicode.BOMOverride(unicode.UTF8.NewDecoder())`` (a UTF-8 byte
order mark dropped, UTF-16 with its mark transcoded, anything else UTF-8), then apimachinery's
``YAMLOrJSONDecoder`` reads JSON where the text starts with ``{`` and YAML otherwise, whatever
the file's name. A ``.json`` file holding YAML and a UTF-16 file were refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.deploy.test_check_manifests_command import EXAMPLES, GRACE_LINE, check, one_error

pytestmark = pytest.mark.timeout(120)


def example(tmp_path: Path, suffix: str, encode) -> Path:
    """The shipped parameter-server example, each file renamed to ``suffix`` and written as
    ``encode`` makes its text, the workers' grace period cut to 30 s (one problem to find)."""
    folder = tmp_path / "pserver"
    folder.mkdir()
    for path in sorted((EXAMPLES / "pserver").glob("*.yaml")):
        text = path.read_text()
        if path.name == "job-digits-ps-worker.yaml":
            obj = yaml.safe_load(text)
            obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
            text = yaml.safe_dump(obj)
        (folder / path.with_suffix(suffix).name).write_bytes(encode(text))
    return folder


ENCODINGS = {
    "utf-8 with a byte order mark": lambda text: b"\xef\xbb\xbf" + text.encode(),
    "utf-16-le with its mark": lambda text: b"\xff\xfe" + text.encode("utf-16-le"),
    "utf-16-be with its mark": lambda text: b"\xfe\xff" + text.encode("utf-16-be"),
}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_text_with_a_byte_order_mark_is_read_as_kubectl_reads_it(tmp_path, encoding, suffix):
    """YAML in a ``.json`` file too: kubectl reads JSON only where the text starts with ``{``."""
    folder = example(tmp_path, suffix, ENCODINGS[encoding])
    job = folder / f"job-digits-ps-worker{suffix}"
    assert check(str(folder)) == (1, f"{job}:1: {GRACE_LINE}\n", "")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_json_with_a_byte_order_mark_is_read_as_json(tmp_path, encoding):
    """``1e3`` is a number in JSON (a string in YAML 1.1): the text after the mark is JSON."""
    job = tmp_path / "job.json"
    text = '{"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": 1e3}}'
    job.write_bytes(ENCODINGS[encoding](text))
    status, out, err = check(str(job))
    assert (status, err) == (1, "")
    assert f"{job}:1: ConfigMap c: label app.kubernetes.io/name is missing" in out.splitlines()


def test_a_json_file_that_starts_with_a_brace_is_still_held_to_json(tmp_path):
    """kubectl's decoder reads such text as JSON and names its JSON error: so does the check."""
    bad = tmp_path / "job.json"
    bad.write_text('{"kind": "Job",\n "metadata": {name: x}}\n')
    status, out, err = check(str(bad))
    assert (status, out) == (2, "")
    assert one_error(err).startswith(f"distconv check-manifests: error: {bad}: line 2, column 15:")


def test_utf16_without_a_mark_is_refused(tmp_path):
    """kubectl reads text without a mark as UTF-8: UTF-16's NULs are no YAML."""
    job = tmp_path / "job.yaml"
    job.write_bytes("kind: ConfigMap\n".encode("utf-16-le"))
    status, out, err = check(str(job))
    assert (status, out) == (2, "")
    assert one_error(err).endswith("YAML allows no character #x0000")


def test_a_broken_utf16_file_names_its_encoding(tmp_path):
    """An odd byte left at the end: the error says which encoding the mark chose."""
    job = tmp_path / "job.yaml"
    job.write_bytes(b"\xff\xfe" + "kind: ConfigMap\n".encode("utf-16-le") + b"\x00")
    status, out, err = check(str(job))
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {job}: byte 35 is no UTF-16 (little-endian, as its "
        "byte order mark says) text: truncated data"
    )


def test_the_shipped_example_as_json_passes(tmp_path):
    """Unchanged: JSON files, one object each, still read as JSON."""
    folder = tmp_path / "json"
    folder.mkdir()
    for path in (EXAMPLES / "pserver").glob("*.yaml"):
        obj = yaml.safe_load(path.read_text())
        (folder / path.with_suffix(".json").name).write_text(json.dumps(obj))
    assert check(str(folder)) == (0, "no problems\n", "")
