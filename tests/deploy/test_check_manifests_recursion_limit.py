"""``distconv check-manifests`` reading nested YAML: the recursion limit raised while reading is
restored when reading raises, and two threads reading at once each keep their room."""

from __future__ import annotations

import sys
import threading

import pytest

from distconv.deploy import check_command, manifest_documents

pytestmark = pytest.mark.timeout(60)


def test_the_recursion_limit_is_restored_when_reading_raises(tmp_path):
    """A read that fails inside the raised recursion limit (a deep document, then text no YAML
    or JSON reads) leaves the process's limit as it found it."""
    before = sys.getrecursionlimit()
    deep = "[" * 3000 + "]" * 3000
    for name, text in (("a.json", f'{{"a": {deep}}} {{"b": '), ("a.yaml", f"a: {deep}\n---\n: :")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(check_command.ManifestReadError):
            check_command.read_sources([str(path)])
        assert sys.getrecursionlimit() == before


def test_two_threads_reading_at_once_keep_their_room_and_restore_the_limit(tmp_path, monkeypatch):
    """Thread a enters the raised limit, b enters too, a leaves while b reads: a restored the
    limit b still needed (b's deep document was refused, ``nested deeper than ...``), and b
    then restored a's raised one, left raised for the rest of the process. Readers now take
    the room one at a time; the interleaving is forced by a decoder that waits on events."""
    before = sys.getrecursionlimit()
    depth = 4 * before  # past the limit outside the room, well inside it
    files = {}
    for name, nest in (("a", 1), ("b", depth)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text('{"x": ' + "[" * nest + "]" * nest + "}")
    inside = {name: threading.Event() for name in files}
    left = threading.Event()
    decode = manifest_documents.decode_json

    def decode_in_turn(text: str, start: int):
        name = threading.current_thread().name
        inside[name].set()
        inside["b"].wait(0.3) if name == "a" else left.wait(2)
        return decode(text, start)

    monkeypatch.setattr(manifest_documents, "decode_json", decode_in_turn)
    results: dict[str, object] = {}

    def read(name: str) -> None:
        try:
            results[name] = len(check_command.read_sources([str(files[name])]))
        except check_command.ManifestReadError as exc:
            results[name] = str(exc)
        if name == "a":
            left.set()

    threads = [threading.Thread(target=read, args=(n,), name=n, daemon=True) for n in files]
    threads[0].start()
    assert inside["a"].wait(2)
    threads[1].start()
    for thread in threads:
        thread.join(5)
    assert results == {"a": 1, "b": 1}
    assert sys.getrecursionlimit() == before
