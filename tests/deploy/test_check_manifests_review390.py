"""``distconv check-manifests``: review k390's findings, each shown by a test that failed
before its fix: the count after the places a line names, a FIFO with no writer, and the
recursion limit raised while reading."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from distconv.deploy import check_command, located
from tests.deploy.test_check_manifests_command import EXAMPLES, in_a_child, one_error

pytestmark = pytest.mark.timeout(60)


def _unlabelled_places(sources: list) -> set[str]:
    """The places each line of the problems of ``sources`` names (all lines alike)."""
    lines = located.located_problems(sources)
    return {line.split(": ConfigMap", 1)[0] for line in lines}


def test_the_count_after_the_places_names_what_it_counts():
    """Seven unnamed ConfigMaps in one file are seven documents, not seven files: the line names
    five and says ``2 more documents`` (it said ``2 more`` where the docs said files), and one
    left over is ``1 more document``."""
    many = [(f"all.yaml:{2 * i + 1}", {"kind": "ConfigMap"}) for i in range(7)]
    named = ", ".join(f"all.yaml:{2 * i + 1}" for i in range(5))
    assert _unlabelled_places(many) == {f"{named} and 2 more documents"}
    assert _unlabelled_places(many[:6]) == {f"{named} and 1 more document"}
    assert _unlabelled_places(many[:5]) == {named}


def _check_waiting(path: Path, wait_s: float | None = None, timeout: float = 10):
    """``distconv check-manifests PATH`` in a child process, its FIFO wait set to ``wait_s``
    where given: its exit status, stdout and stderr. ``timeout`` bounds it: a hang fails."""
    shrink = "" if wait_s is None else f"c.FIFO_WAIT_S = {wait_s}; "
    code = (
        "import sys; from distconv.deploy import check_command as c; "
        f"{shrink}from distconv.cli import main; "
        "raise SystemExit(main(['check-manifests', sys.argv[1]]))"
    )
    done = in_a_child("-c", code, str(path), timeout=timeout)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_a_fifo_nobody_writes_to_is_refused_in_bounded_time(tmp_path):
    """A FIFO with no writer is refused after ``FIFO_WAIT_S`` with one line naming it: opening
    it hung the command for ever (a CI step never ended)."""
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    status, out, err = _check_waiting(fifo, wait_s=0.2)
    assert time.monotonic() - started < 5
    assert (status, out) == (2, "")
    assert one_error(err) == (
        f"distconv check-manifests: error: {fifo}: a FIFO nothing opened to write in 0.2 s (or "
        "another process read what was written: a FIFO gives each byte to one reader)"
    )


def _write_when_read(fifo: Path, text: str, after_s: float, within_s: float) -> threading.Thread:
    """A thread that, ``after_s`` from now, writes ``text`` to ``fifo`` once a reader has it
    open, and gives up ``within_s`` from now where none does: a blocking ``open`` of a FIFO
    whose reader died first waited for ever, a stuck thread left in the pytest worker."""
    deadline = time.monotonic() + within_s

    def write() -> None:
        time.sleep(after_s)
        while True:
            try:  # ENXIO while no reader has it open: looked at again, not waited on for ever
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                break
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.02)
        os.set_blocking(fd, True)
        with open(fd, "w") as writer:
            writer.write(text)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_fifo_written_to_late_is_read(tmp_path):
    """A FIFO whose writer opens it a while after the command does (``<(helm template ...)``
    renders first) is read as a file is: its problem is named at ``FIFO:1``."""
    fifo = tmp_path / "rendered.yaml"
    os.mkfifo(fifo)
    writer = _write_when_read(fifo, "kind: ConfigMap\nmetadata:\n  name: c\n", 0.3, 10)
    status, out, err = _check_waiting(fifo)
    writer.join(5)
    assert (status, err) == (1, "")
    assert out.splitlines()[0] == f"{fifo}:1: ConfigMap c: label app.kubernetes.io/name is missing"


def test_the_late_writer_ends_where_no_reader_ever_comes(tmp_path):
    """Where the child dies before it opens the FIFO, the writer gives up within its bound
    instead of staying blocked in ``open`` for the rest of the pytest worker."""
    fifo = tmp_path / "rendered.yaml"
    os.mkfifo(fifo)
    writer = _write_when_read(fifo, "kind: ConfigMap\n", 0, 0.2)
    writer.join(3)
    assert not writer.is_alive()


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
    decode = check_command.decode_json

    def decode_in_turn(text: str, start: int):
        name = threading.current_thread().name
        inside[name].set()
        inside["b"].wait(0.3) if name == "a" else left.wait(2)
        return decode(text, start)

    monkeypatch.setattr(check_command, "decode_json", decode_in_turn)
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


def test_a_huge_replica_count_is_judged_without_listing_each_shard(tmp_path):
    """``replicas: 1000000000`` (an int32 the API server takes) on the shards' StatefulSet is
    judged within 1 GiB in a moment: each shard's DNS name was listed first, 1e9 strings, so
    the command died of a MemoryError traceback (killed outright without a memory limit)."""
    folder = Path(shutil.copytree(EXAMPLES / "pserver", tmp_path / "pserver"))
    sts = folder / "statefulset-digits-ps-pserver.yaml"
    sts.write_text(sts.read_text().replace("replicas: 2\n", "replicas: 1000000000\n", 1))
    done = in_a_child("-m", "distconv", "check-manifests", str(folder), memory=1 << 30)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert (done.returncode, err) == (1, "")
    assert f"{sts}:2: StatefulSet digits-ps-pserver: --num-shards 2 but the StatefulSet" in out
