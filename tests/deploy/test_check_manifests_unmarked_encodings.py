"""``distconv check-manifests`` on text it cannot read as UTF-8: UTF-32 with a byte order mark is
refused by its name; UTF-16 or UTF-32 without a mark names the encoding it looks like; other
unreadable text gets no guess."""

from __future__ import annotations

import codecs

import pytest

from distconv.deploy import check_command
from tests.deploy.test_check_manifests_stdin import CONFIG_MAP

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("codec", ["utf-32-le", "utf-32-be"])
def test_utf32_text_is_refused_by_its_name(tmp_path, codec):
    """A UTF-32 file (its byte order mark first) was read as UTF-16 (``FF FE`` starts both
    marks) or as UTF-8, and refused as ``YAML allows no character #x0000``, which named no
    encoding. kubectl reads no UTF-32: the line says that is what the file is."""
    path = tmp_path / "job.yaml"
    path.write_bytes(codecs.BOM_UTF32_LE if codec.endswith("le") else codecs.BOM_UTF32_BE)
    with path.open("ab") as file:
        file.write(CONFIG_MAP.decode().encode(codec))
    with pytest.raises(check_command.ManifestReadError) as refused:
        check_command.read_sources([str(path)])
    assert (
        str(refused.value) == f"{path}: UTF-32 text (its byte order mark): kubectl reads no UTF-32"
    )


@pytest.mark.parametrize(
    ("codec", "shown"),
    [
        ("utf-16-le", "UTF-16 (little-endian)"),
        ("utf-16-be", "UTF-16 (big-endian)"),
        ("utf-32-le", "UTF-32 (little-endian)"),
        ("utf-32-be", "UTF-32 (big-endian)"),
    ],
)
@pytest.mark.parametrize("text", ["kind: ConfigMap\n", '{"kind": "ConfigMap"}\n', "k: é\n"])
def test_wide_text_without_a_mark_names_the_encoding_it_looks_like(tmp_path, codec, shown, text):
    """UTF-16 or UTF-32 with no byte order mark is refused (kubectl reads it as UTF-8), but the
    line said only ``YAML allows no character #x0000`` or ``invalid start byte``: it now says
    first which encoding the first bytes show, then the error as before."""
    path = tmp_path / "job.yaml"
    path.write_bytes(text.encode(codec))
    with pytest.raises(check_command.ManifestReadError) as refused:
        check_command.read_sources([str(path)])
    said = f"{path}: {shown} text with no byte order mark, by its first bytes, read as UTF-8: "
    assert str(refused.value).startswith(said)
    assert str(refused.value) != said  # the reader's own error follows


@pytest.mark.parametrize(
    "data",
    [
        b"kind: ConfigMap\n\0",  # a NUL further on: no guess from the first bytes
        b"\0\0\0\0kind: ConfigMap\n",
        codecs.BOM_UTF16_LE + "kind: [\n".encode("utf-16-le"),  # a mark: its encoding is read
    ],
)
def test_other_unreadable_text_gets_no_guess(tmp_path, data):
    """Only where the first bytes look like a wide encoding and no mark says one is it named."""
    path = tmp_path / "job.yaml"
    path.write_bytes(data)
    with pytest.raises(check_command.ManifestReadError) as refused:
        check_command.read_sources([str(path)])
    assert "no byte order mark" not in str(refused.value)
