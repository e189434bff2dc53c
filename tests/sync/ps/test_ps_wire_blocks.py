"""The wire format's checks and the block rule, without sockets."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from distconv.sync.ps.blocks import Layout, ParamSpec
from distconv.sync.ps.wire import WireError, pack, unpack_arrays, unpack_header
from tests.child_env import child_path


def _request(**extra):
    head = {"op": "pull", "id": 3, "job": "j", "rank": 0, "blocks": [1, 2], **extra}
    return pack(head, [np.arange(6.0).reshape(2, 3), np.zeros((), np.int64)])


def test_a_message_round_trips_without_copying_the_arrays():
    frames = _request()
    header = unpack_header(frames[0])
    arrays = unpack_arrays(header, frames[1:])
    np.testing.assert_array_equal(arrays[0], np.arange(6.0).reshape(2, 3))
    assert arrays[1].shape == () and header["arrays"][0] == ["float64", [2, 3], 48]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda h, f: (b"\xc1", f), "not msgpack"),
        (lambda h, f: (msgpack.packb([1, 2]), f), "must be a map"),
        (lambda h, f: (msgpack.packb({**h, "v": 0}), f), "protocol version 0"),
        (lambda h, f: (msgpack.packb({**h, "op": "drop_tables"}), f), "unknown op"),
        (lambda h, f: (msgpack.packb({k: v for k, v in h.items() if k != "blocks"}), f), "lacks"),
        (lambda h, f: (msgpack.packb({**h, "rank": "0"}), f), "'rank' has type str"),
        (lambda h, f: (msgpack.packb(h), f[:1]), "lists 2 arrays, message has 1"),
        (lambda h, f: (msgpack.packb(h), [bytes(f[0])[:-8], f[1]]), "frame has 40"),
        (lambda h, f: (_with(h, 0, ["object", [2, 3], 48]), f), "dtype 'object' is not one of"),
        (lambda h, f: (_with(h, 0, ["float32", [2, 3], 48]), f), "is 24 bytes"),
        (lambda h, f: (_with(h, 0, ["float64", [9, 9], 48]), f), "is 648 bytes"),
        (lambda h, f: (_with(h, 0, ["float64", [2**40], 2**43]), f), "declares 8796093022"),
    ],
)
def test_every_bad_message_is_named_before_any_frame_becomes_an_array(change, message):
    frames = _request()
    header = msgpack.unpackb(frames[0])
    head, rest = change(header, frames[1:])
    with pytest.raises(WireError, match=message.replace("[", r"\[").replace("(", r"\(")):
        checked = unpack_header(head)
        unpack_arrays(checked, rest, max_bytes=1 << 20)


def _with(header, i, entry):
    arrays = [list(a) for a in header["arrays"]]
    arrays[i] = entry
    return msgpack.packb({**header, "arrays": arrays})


def test_blocks_are_balanced_by_bytes_and_a_large_parameter_spans_shards():
    specs = [ParamSpec("big", (1000, 10), "float64"), ParamSpec("b", (10,), "float32"),
             ParamSpec("table", (300, 8), "float32", sparse=True)]  # fmt: skip
    layout = Layout(specs, num_shards=3, block_bytes=4096)
    loads = layout.shard_bytes()
    assert sum(loads) == 80000 + 40 + 9600
    assert max(loads) - min(loads) <= max(b.nbytes for b in layout.blocks)
    assert {layout.shard_of[b.id] for b in layout.blocks if b.param == 0} == {0, 1, 2}
    # a sparse block holds whole rows; the blocks of a parameter tile it exactly
    for p, spec in enumerate(specs):
        mine = [b for b in layout.blocks if b.param == p]
        assert mine[0].start == 0 and mine[-1].stop == spec.rows
        assert all(x.stop == y.start for x, y in zip(mine, mine[1:]))
    assert all(b.nbytes % 32 == 0 for b in layout.blocks if b.param == 2)
    # deterministic: the same inputs give the same table on every worker
    again = Layout(specs, num_shards=3, block_bytes=4096)
    assert again.blocks == layout.blocks and again.shard_of == layout.shard_of


@pytest.mark.parametrize(
    ("rows", "shards", "words"),
    [
        (300, 2, "the model's 1 block leaves 1 of the 2 pservers without one (b:2), and a pserver "
              "holds at least one: run at most 1 shard"),
        (600, 3, "the model's 2 blocks leave 1 of the 3 pservers without one (c:3), and a pserver "
              "holds at least one: run at most 2 shards"),
    ],
)  # fmt: skip
def test_idle_shards_are_refused_in_words_of_the_right_number(rows, shards, words):
    """A tied 300 x 6 table is one block: the refusal said "1 blocks leave ... 1 shards"."""
    table = ParamSpec("table", (rows, 6), "float32", sparse=True)
    layout = Layout([table], shards, block_bytes=300 * 6 * 4)  # 300 rows a block
    assert layout.idle_problem(["a:1", "b:2", "c:3"][:shards]) == words


def test_pserver_command_line_errors_are_one_line(tmp_path):
    import subprocess
    import sys

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "distconv", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PYTHONPATH": child_path()},
        )

    base = ["pserver", "--shard", "0", "--num-shards", "1", "--workers", "1"]
    no_keys = run(*base, "--bind", "127.0.0.1:0")
    assert no_keys.returncode == 1 and "pass --keys DIR, or --insecure" in no_keys.stderr
    missing = run(*base, "--bind", "127.0.0.1:0", "--keys", str(tmp_path / "none"))
    assert missing.returncode == 1 and "server.key_secret not found" in missing.stderr
    bad = run(*base, "--bind", "localhost", "--insecure")
    assert bad.returncode == 1 and "expected HOST:PORT, got 'localhost'" in bad.stderr
    port = run(*base, "--bind", "127.0.0.1:0", "--insecure", "--health-port", "99999")
    assert port.returncode == 2 and "--health-port: a port is 0..65535, got 99999" in port.stderr
    for failed in (no_keys, missing, bad):
        assert "Traceback" not in failed.stderr and len(failed.stderr.strip().splitlines()) == 1
    both = run(*base, "--bind", "127.0.0.1:0", "--insecure", "--keys", str(tmp_path))
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    made = run("keys", str(tmp_path / "k"), "--workers", "3")
    assert made.returncode == 0 and len(list((tmp_path / "k").iterdir())) == 8
    again = run("keys", str(tmp_path / "k"), "--workers", "3")
    assert again.returncode == 1 and "already holds keys" in again.stderr
    none = run("keys", str(tmp_path / "k0"), "--workers", "0")
    assert none.returncode == 1 and "--workers must be 1..65536, got 0" in none.stderr
    for failed in (again, none):  # one line naming the cause, as README says of an error
        assert "Traceback" not in failed.stderr and len(failed.stderr.strip().splitlines()) == 1
