"""A sparse torch tensor's entries in one order, the same whatever order they were built in,
and an array's bytes on the host (another library's read there first): what
:mod:`distconv.plain_json` hashes them by. It imports nothing of distconv, nor torch (a
tensor's own methods are used; torch is asked for by name only where a tensor is given).
"""

from __future__ import annotations

import math
import sys
from typing import Any


def coo_entries(tensor: Any) -> tuple[Any, Any]:
    """The indices (sparse dims x entries) and values of a sparse tensor read as COO, in one
    order: coalesced (sorted indices, each once, a repeated one's values summed in
    :func:`sorted_entries`' order, as a float sum's bits follow its terms' order) where torch
    can sum its dtype; where it cannot (float8, uint16..64, and complex32 with an index
    repeated: ``coalesce`` raises NotImplementedError) sorted by :func:`sorted_entries`, its
    entries as stored. They were hashed in their stored order: two ranks that built the same
    tensor with its entries in another order disagreed in the job check."""
    entries = tensor.detach()
    if str(entries.layout) != "torch.sparse_coo":
        entries = entries.to_sparse_coo()  # CSR, CSC, BSR, BSC: one form to hash
    if entries.is_coalesced():  # sorted, each index once: coalesce would give it as it is
        return entries._indices(), entries._values()
    # one sort: with no index repeated it is coalesce's output, else coalesced once from it
    # (coalesce sorted anew and a float's repeated index was sorted and summed twice)
    indices, values, repeated = sorted_entries(entries._indices(), entries._values(), entries.shape)
    if not repeated:
        return indices, values
    made = sys.modules["torch"].sparse_coo_tensor(indices, values, entries.shape)
    try:
        made = made.coalesce()  # summed in this order: coalesce's sort is stable
    except NotImplementedError:  # no sum for its dtype: each entry kept, in this order
        return indices, values
    return made._indices(), made._values()


def sorted_entries(indices: Any, values: Any, shape: Any) -> tuple[Any, Any, bool]:
    """COO ``indices`` and ``values`` ordered by index; entries of one index (a sum torch cannot
    do) kept, each, ordered by their values' bytes after it; and whether an index repeats.

    So the same entries in any order agree, and two different tensors never do. A repeated
    index is not refused: a ValueError on the one rank that holds it, raised before the job
    check's exchange, left its peers waiting there, and refused ranks that all hold the same
    tensor. What it costs: such a tensor agrees only with one of the same duplicates, not with
    one holding their sum once (which torch could not make of it either).

    Args:
        indices: the entries' indices, an int64 tensor of (sparse dims, entries).
        values: their values, a tensor of (entries, *dense dims).
        shape: the tensor's shape: its first ``len(indices)`` sizes bound each index.
    """
    if int(indices.shape[1]) < 2:
        return indices, values, False
    linear, order = _linear(indices, shape).sort(stable=True)
    indices, values = indices.index_select(1, order), values[order]  # faster than [:, order]
    same = linear[1:] == linear[:-1]
    if not bool(same.any()):
        return indices, values, False
    # the values of a repeated index sorted again, by value then index (stable passes, least
    # significant first), in their places; its entries' indices are one, left as they are
    grouped = same.new_zeros(len(linear))
    grouped[1:] |= same
    grouped[:-1] |= same
    at = grouped.nonzero().squeeze(1)
    torch = sys.modules["torch"]  # given a tensor, torch is loaded
    order = torch.arange(len(linear), device=linear.device)  # a gather: uint16 has no index_put
    order[at] = at[_stable_order(_value_words(values[at]) + [linear[at]])]
    return indices, values[order], True


def _linear(indices: Any, shape: Any) -> Any:
    """Each entry's linear index in the sparse dims: the key that orders ``indices`` (torch
    refuses a shape whose element count passes int64, so it never overflows); with no sparse
    dim, each entry's is 0 (a sum of no terms was the int 0, which has no ``sort``)."""
    sizes = [int(n) for n in shape[: indices.shape[0]]]
    strides = [math.prod(sizes[d + 1 :]) for d in range(len(sizes))]
    zero = indices.new_zeros(indices.shape[1])
    return sum((indices[d] * stride for d, stride in enumerate(strides)), zero)


def _value_words(values: Any) -> list[Any]:
    """Each entry's value bytes as int64 words (zero-padded to 8 bytes), the last word first:
    an order of any dtype, float8's and complex32's too, that torch sorts (it compares none of
    those); which order matters not, only that every process shares it. Rows of no bytes (a
    dense dim of size 0) have none: all equal, no int64 view of them exists."""
    if math.prod(values.shape[1:]) == 0:
        return []
    torch = sys.modules["torch"]  # given a tensor, torch is loaded
    rows = values.contiguous().view(torch.uint8).reshape(values.shape[0], -1)
    padding = -rows.shape[1] % 8
    if padding:
        zeros = torch.zeros(rows.shape[0], padding, dtype=torch.uint8, device=rows.device)
        rows = torch.cat([rows, zeros], 1)
    words = rows.view(torch.int64)
    return [words[:, w] for w in reversed(range(words.shape[1]))]


def _stable_order(keys: list[Any]) -> Any:
    """The permutation that sorts by ``keys``, the last the most significant (stable sorts, as
    a radix sort's passes)."""
    order = keys[0].argsort(stable=True)
    for key in keys[1:]:
        order = order[key[order].argsort(stable=True)]
    return order


def torch_bytes(tensor: Any) -> bytes | None:
    """A torch tensor's bytes in C order, read as uint8, or None where it is no torch tensor.
    Its values' JSON text (``tolist``) made a Python float of each (half a second a million);
    the bytes are one copy, tell -0.0 from 0.0 as that text did, and are what an ml_dtypes
    array of its values holds (numpy's bfloat16 hashes alike)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(tensor, torch.Tensor):
        return None
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def field_bytes(array: Any) -> bytes:
    """A numpy array's values' bytes in C order; a structured one's field by field, down to the
    fields of a nested struct or of a subarray of structs, never its padding: uninitialised,
    it is another in each process (a repacked copy of a subarray of aligned structs kept a
    padding of its own, of fresh memory)."""
    if array.dtype.fields is None:
        return array.tobytes()
    return b"".join(field_bytes(array[name]) for name in array.dtype.names)


def on_host(array: Any) -> Any:
    """Another library's array in host memory, by the methods it has: torch's ``detach`` (a
    tensor that needs a gradient refuses numpy), ``resolve_conj`` and ``resolve_neg`` (a lazy
    conjugate's view refuses numpy: written by its text, it disagreed with its equal copy) and
    ``cpu``, cupy's ``get`` (it refuses an implicit copy to the host)."""
    for method in ("detach", "resolve_conj", "resolve_neg", "cpu"):
        if callable(getattr(array, method, None)):
            array = getattr(array, method)()
    if hasattr(array, "__cuda_array_interface__") and callable(getattr(array, "get", None)):
        array = array.get()
    return array
