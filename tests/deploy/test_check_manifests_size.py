"""``distconv check-manifests`` reads at most :data:`MAX_BYTES` of any input: a
device (``/dev/zero``), a FIFO, stdin or a regular file past it is one error line, at once,
where the whole of it was read into memory (for ever, from ``/dev/zero``)."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from distconv.deploy.check_command import MAX_BYTES
from tests.deploy.test_check_manifests_command import in_a_child

pytestmark = pytest.mark.timeout(120)

#: the child's memory: the bound read, and far less than an unbounded read of /dev/zero
MEMORY = 1 << 30


def check(*args: str, stdin=subprocess.DEVNULL) -> tuple[int, str, str]:
    """``python -m distconv check-manifests ARGS`` with 1 GiB of memory and 30 s."""
    command = ("-m", "distconv", "check-manifests", *args)
    done = in_a_child(*command, stdin=stdin, text=True, timeout=30, memory=MEMORY)
    return done.returncode, done.stdout, done.stderr


def too_large(shown: str) -> tuple[int, str, str]:
    return (
        2,
        "",
        f"distconv check-manifests: error: {shown}: more than {MAX_BYTES >> 20} MiB, which no "
        "job's manifests need\n",
    )


def test_the_bound_is_64_mib():
    assert MAX_BYTES == 64 << 20


def test_a_device_is_read_no_further_than_the_bound():
    assert check("/dev/zero") == too_large("/dev/zero")


def test_stdin_is_read_no_further_than_the_bound():
    with open("/dev/zero", "rb") as zeros:
        assert check("-", stdin=zeros) == too_large("<stdin>")


def test_a_fifo_is_read_no_further_than_the_bound(tmp_path):
    fifo = tmp_path / "manifests.yaml"
    os.mkfifo(fifo)

    def write() -> None:  # until the reader stops reading
        try:
            with open(fifo, "wb") as out:
                while True:
                    out.write(b"# comment\n" * 100_000)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert check(str(fifo)) == too_large(str(fifo))
    writer.join(timeout=10)
    assert not writer.is_alive()


def test_a_file_at_the_bound_is_read_and_one_past_it_is_not(tmp_path):
    """The same limit for a regular file: a sparse file of zeros costs no disk."""
    at = tmp_path / "at.yaml"
    at.write_bytes(b"kind: ConfigMap\nmetadata: {name: c}\n# " + b"x" * 100)
    with open(at, "r+b") as file:
        file.truncate(MAX_BYTES)  # NULs past the comment: YAML refuses #x0000, past the bound
    status, out, err = check(str(at))
    assert (status, out) == (2, "")
    assert "YAML allows no character #x0000" in err
    past = tmp_path / "past.yaml"
    past.write_bytes(b"")
    os.truncate(past, MAX_BYTES + 1)
    assert check(str(past)) == too_large(str(past))
