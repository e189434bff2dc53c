"""How :mod:`distconv.plain_json` walks a config's objects: through a set with one walk state,
a deep chain refused in one line, process state left out, a structured array by its values.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from distconv import plain_json
from distconv.optim import create_optimizer
from distconv.sync.description import digest
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.child_env import child_env
from tests.test_run_scheme import _small_net

pytestmark = pytest.mark.timeout(60)


class _Node:
    """A tree's node: a set of children, each linking back to it."""

    def __init__(self, parent: _Node | None = None) -> None:
        self.parent, self.children = parent, set()
        if parent is not None:
            parent.children.add(self)


class _Link:
    def __init__(self, after: _Link | None) -> None:
        self.after = after


def _trainer(out, config) -> Trainer:
    return Trainer(_small_net(), LocalSync(create_optimizer("sgd")), 8, out_dir=out, config=config)


def test_a_cycle_through_a_set_is_a_back_reference_and_a_deep_chain_one_named_line(tmp_path):
    """c97fcd95 dumped each set element afresh, losing the cycle guard: a tree gave a bare
    RecursionError at Trainer() and at the job check, as did a chain of 330 objects."""
    root = _Node()
    _Node(root)
    assert plain_json.dumps({"tree": root}, sort_keys=True) == (
        '{"tree": {"class": "_Node", "fields": {"children": [{"class": "_Node", "fields": '
        '{"children": [], "parent": {"class": "_Node", "fields": "..."}}}], "parent": null}}}'
    )
    digest({"config.tree": root})
    _trainer(tmp_path / "tree", {"tree": root})
    chain = None
    for _ in range(2000):
        chain = _Link(chain)
    with pytest.raises(ValueError, match=r"^config 'chain' cannot .*nests deeper") as caught:
        _trainer(tmp_path / "chain", {"chain": chain})
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="nests deeper") as caught:
        digest({"config.chain": chain})
    assert isinstance(caught.value, RecursionError)  # as the PS hello takes "too deep"


def test_a_set_s_elements_are_ordered_by_their_text_with_sorted_keys():
    """Set elements sorted by their text written without sorted keys flipped with the order
    their attributes were set in: the same config, two digests (L3)."""

    class _Pair:
        pass

    def pair(a: int, b: int, a_first: bool) -> _Pair:
        made = _Pair()
        for name in ("a", "b") if a_first else ("b", "a"):
            setattr(made, name, {"a": a, "b": b}[name])
        return made

    one = [pair(2, 1, True), pair(1, 2, True)]
    other = [pair(2, 1, True), pair(1, 2, False)]
    text = plain_json.dumps(frozenset(one), sort_keys=True)
    assert text == plain_json.dumps(frozenset(other), sort_keys=True)

    def by_plain(elements: list[_Pair]) -> list[str]:  # a set inside a repr: plain sorts it
        return [plain_json.dumps(e, sort_keys=True) for e in plain_json.plain(set(elements))]

    assert by_plain(one) == by_plain(other)


class _Loader:
    """A data object that starts a prefetch thread: its state is its process's alone."""

    def __init__(self, name: str) -> None:
        self.name, self.worker = name, threading.Thread(target=time.sleep, args=(0,))
        self.worker.start()
        self.lock, self._cache = threading.Lock(), {"seen": id(self)}
        self.worker.join()


class _Aug:
    def __init__(self, p: float) -> None:
        self.p, self._calls = p, 0


@dataclasses.dataclass
class _Spec:
    name: str
    pid: int = dataclasses.field(default_factory=os.getpid, repr=False)


def test_an_object_is_walked_by_its_public_attributes_and_process_state_by_its_type():
    """c97fcd95 walked every attribute, private ones too, and wrote a thread, a lock or a
    file by its text (an ident, a state, a name): ranks that agree were refused at setup, and
    a resume of a config holding a data object with a prefetch thread as "a different run"."""
    one, other = _Loader("digits"), _Loader("digits")
    other.lock.acquire()
    assert plain_json.dumps(one) == plain_json.dumps(other)
    assert json.loads(plain_json.dumps(one)) == {
        "class": "_Loader",
        "fields": {"name": "digits", "worker": "Thread", "lock": "lock"},
    }
    other.name = "letters"
    assert plain_json.dumps(one) != plain_json.dumps(other)
    busy = _Aug(0.1)
    busy._calls = 7
    assert plain_json.dumps(busy) == plain_json.dumps(_Aug(0.1))
    assert plain_json.dumps(_Aug(0.1)) != plain_json.dumps(_Aug(0.9))
    assert plain_json.dumps(_Spec("a", pid=1)) == plain_json.dumps(_Spec("a", pid=2))
    assert plain_json.dumps(_Spec("a")) != plain_json.dumps(_Spec("b"))


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype([("a", "i1"), ("b", [("c", "i1"), ("d", "f8")], (2,))], align=True),
        np.dtype({"names": ["a", "b"], "formats": ["i1", "f8"], "offsets": [4, 8], "itemsize": 24}),
    ],
)
def test_a_structured_array_is_hashed_by_its_fields_values_not_its_padding(dtype):
    """An aligned structured array's padding bytes (uninitialised memory) were hashed: another
    digest in each process for the same table, so ranks that agree were refused."""

    def table(junk: int, a: int) -> np.ndarray:
        made = np.empty(2, dtype)
        made.view(np.uint8)[:] = junk  # what the padding held: another in each process
        made[:] = 0
        made["a"] = a
        return made

    assert plain_json.dumps(table(7, 1)) == plain_json.dumps(table(9, 1))
    assert plain_json.dumps(table(7, 1)) != plain_json.dumps(table(7, 2))


class OutOfMemoryError(RuntimeError):
    """torch.cuda's: a RuntimeError."""


class _GpuTensor:
    """A dense tensor on a GPU whose copy to the host runs out of memory."""

    dtype, shape, layout, is_meta, is_quantized, is_nested = (
        "float32",
        (4,),
        "torch.strided",
        False,
        False,
        False,
    )

    def __repr__(self) -> str:  # summarised, as a tensor's is
        return "tensor([0., 0., 0., 0.], device='cuda:0')"

    def __dlpack__(self) -> None:  # an array to is_array
        raise NotImplementedError

    def cpu(self) -> None:
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_an_out_of_memory_error_copying_an_array_is_raised_not_written_as_its_str():
    """8cbe29e4 caught RuntimeError from reading a tensor's values, to write a sparse one by
    its str: one rank out of memory wrote the str while its peers wrote the hash, and the job
    check named no cause. It is raised; a sparse tensor is told by its layout first."""
    with pytest.raises(OutOfMemoryError):
        plain_json.dumps({"mask": _GpuTensor()})


_SUBARRAY_OF_STRUCTS = """
import sys
import numpy as np
from distconv import plain_json
junk = [np.frombuffer(np.random.bytes(1 << 12), np.uint8).copy() for _ in range({n})]
del junk  # freed memory of random bytes, which a fresh allocation may be given
dtype = np.dtype([("a", "i1"), ("b", [("c", "i1"), ("d", "f8")], (2,))], align=True)
table = np.zeros(3, dtype)
table["a"] = [1, 2, 3]
print(plain_json.dumps(table))
"""


def test_a_subarray_of_aligned_structs_is_hashed_the_same_in_every_process():
    """A field that is an array of aligned structs kept a padding of its own in the repacked
    copy the hash read, fresh memory: another digest in each process for one table of zeros,
    so ranks that agree, and a resume, were refused."""
    written = {
        subprocess.run(
            [sys.executable, "-c", _SUBARRAY_OF_STRUCTS.format(n=n)],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=50,
            check=True,
        ).stdout
        for n in (0, 5, 50)
    }
    assert len(written) == 1, written


def test_a_queue_between_threads_is_written_by_its_type_not_its_contents():
    """A queue.Queue was walked by its public attributes, its queued items among them: ranks
    whose threads had put another count by then disagreed."""
    import queue

    ahead, behind = queue.Queue(), queue.Queue()
    ahead.put(1)
    assert plain_json.dumps({"q": ahead}) == plain_json.dumps({"q": behind}) == '{"q": "Queue"}'


def test_a_0d_meta_tensor_is_written_by_its_text_not_a_traceback():
    """A 0-d tensor was read with item() before the meta check: a meta one has no value to
    give, and Trainer() ended in a bare RuntimeError."""
    torch = pytest.importorskip("torch")

    assert "meta" in plain_json.dumps({"m": torch.ones((), device="meta")})
    assert plain_json.dumps({"z": torch.tensor(3.5)}) == '{"z": 3.5}'


def test_asyncio_and_multiprocessing_primitives_are_written_by_their_type():
    """Their text holds their state (an asyncio.Queue's items, a multiprocessing Lock's owner,
    an Event's flag): ranks that agree were refused, as with a queue.Queue."""
    import asyncio
    import multiprocessing

    full, empty = asyncio.Queue(), asyncio.Queue()
    full.put_nowait(1)
    assert plain_json.dumps(full) == plain_json.dumps(empty)
    is_set, unset = multiprocessing.Event(), multiprocessing.Event()
    is_set.set()
    assert plain_json.dumps(is_set) == plain_json.dumps(unset)
    held, free = multiprocessing.Lock(), multiprocessing.Lock()
    held.acquire()
    assert plain_json.dumps(held) == plain_json.dumps(free)
    held.release()
    owned, loose = multiprocessing.Condition(), multiprocessing.Condition()
    owned.acquire()
    assert plain_json.dumps(owned) == plain_json.dumps(loose)
    owned.release()


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_a_sparse_tensor_is_written_by_its_content_not_its_summarised_text():
    """A sparse tensor was written by its str, which summarises past 1000 values: two that
    differ only in the middle agreed. Its layout, shape, dtype and its coalesced indices' and
    values' hashes: a tensor with its entries given twice over, or in another order, agrees."""
    torch = pytest.importorskip("torch")
    where = torch.arange(3000).repeat(2, 1)

    def sparse(middle: float):
        values = torch.ones(3000)
        values[1500] = middle
        return torch.sparse_coo_tensor(where, values, (3000, 3000), check_invariants=True)

    ours = plain_json.dumps({"mask": sparse(1.0)})
    assert ours != plain_json.dumps({"mask": sparse(2.0)})
    # the same in another order, the middle entry first and given twice: 0.5 and 0.5
    turned = torch.cat([where[:, 1500:], where[:, :1500], where[:, 1500:1501]], 1)
    values = torch.ones(3001)
    values[0] = values[3000] = 0.5
    doubled = torch.sparse_coo_tensor(turned, values, check_invariants=True)
    assert plain_json.dumps({"mask": doubled}) == ours
    written = plain_json.plain(sparse(1.0))
    assert (written["layout"], written["shape"], written["dtype"]) == (
        "torch.sparse_coo",
        [3000, 3000],
        "torch.float32",
    )
    if hasattr(torch, "sparse_csr"):  # CSR: by its content too, told from COO by its layout
        csr = plain_json.plain(sparse(1.0).to_sparse_csr())
        assert csr["layout"] == "torch.sparse_csr"
        assert csr["values_sha256"] == written["values_sha256"]
        assert csr != plain_json.plain(sparse(2.0).to_sparse_csr())


def test_a_sparse_tensor_of_a_dtype_torch_sums_none_of_is_written_by_its_entries():
    """An uncoalesced sparse tensor of a dtype torch has no sum for (float8, uint16..64) made
    coalesce raise NotImplementedError: a config that its str wrote before was refused with a
    bare error. It is read by its entries (in one order: test_plain_json_sparse.py): the same
    tensor agrees, another middle entry does not."""
    torch = pytest.importorskip("torch")
    where = torch.arange(3000).repeat(2, 1)

    def sparse(middle: int, dtype):
        values = torch.ones(3000)
        values[1500] = middle
        return torch.sparse_coo_tensor(where, values.to(dtype), (3000, 3000))

    for dtype in (torch.float8_e4m3fn, torch.uint16):
        written = plain_json.dumps({"mask": sparse(1, dtype)})
        assert written == plain_json.dumps({"mask": sparse(1, dtype)})
        assert written != plain_json.dumps({"mask": sparse(2, dtype)})
        assert json.loads(written)["mask"]["dtype"] == str(dtype)
