"""How :mod:`distconv.plain_json` writes a sparse tensor of a dtype torch sums none of (float8,
uint16..64, complex32): by its entries in one order, whatever order they were built in.
"""

from __future__ import annotations

import pytest

from distconv import plain_json

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.timeout(60)

#: the dtypes whose coalesce raises NotImplementedError (torch has no sum for them)
_NO_SUM = ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64", "complex32")


def _dtypes() -> list:
    return [getattr(torch, name) for name in _NO_SUM if hasattr(torch, name)]


def _coo(where: list[list[int]], values: list[float], dtype, shape=(4, 5)):
    """A COO tensor of ``values`` (made as float32, then cast) at ``where``, not coalesced."""
    return torch.sparse_coo_tensor(
        torch.tensor(where), torch.tensor(values).float().to(dtype), shape
    )


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", _dtypes(), ids=str)
def test_the_same_entries_in_another_order_agree(dtype):
    """coalesce raised for these dtypes and the tensor was hashed as stored: two ranks that
    built the same tensor with its entries in another order disagreed in the job check (a
    false refusal). Its entries are ordered by index; another value still differs."""
    where, values = [[0, 3, 1, 2], [4, 0, 2, 1]], [1, 2, 3, 4]
    ours = plain_json.plain(_coo(where, values, dtype))
    turned = [list(reversed(row)) for row in where]
    assert plain_json.plain(_coo(turned, list(reversed(values)), dtype)) == ours
    ordered = _coo([[0, 1, 2, 3], [4, 2, 1, 0]], [1, 3, 4, 2], dtype)  # marked coalesced:
    ordered = torch.sparse_coo_tensor(ordered._indices(), ordered._values(), is_coalesced=True)
    assert plain_json.plain(ordered) == ours  # coalesce gives it as it is, in the same order
    assert plain_json.plain(_coo(where, [1, 2, 3, 5], dtype)) != ours
    moved = [[0, 3, 1, 2], [4, 0, 2, 2]]  # the last value at another index
    assert plain_json.plain(_coo(moved, values, dtype)) != ours
    # index (3, 0) given twice, values 2 and 6: complex32's coalesce raises only then
    twice = _coo([[*where[0], 3], [*where[1], 0]], [*values, 6], dtype)
    again = _coo([[3, *turned[0]], [0, *turned[1]]], [6, *reversed(values)], dtype)
    assert plain_json.plain(again) == plain_json.plain(twice) != ours


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", _dtypes(), ids=str)
def test_a_repeated_index_is_kept_in_one_order(dtype):
    """An index given twice needs a sum torch cannot do: its entries are kept, ordered by index
    then value, so the same duplicates in any order agree; a tensor of other duplicates (or
    their sum given once) does not, as documented (never two different tensors agreeing)."""
    where, values = [[1, 0, 1, 3], [2, 0, 2, 4]], [1, 7, 2, 5]
    ours = plain_json.plain(_coo(where, values, dtype))
    for order in ([3, 2, 1, 0], [2, 0, 3, 1], [0, 2, 1, 3]):
        shuffled = [[row[i] for i in order] for row in where]
        again = _coo(shuffled, [values[i] for i in order], dtype)
        assert plain_json.plain(again) == ours, order
    summed = _coo([[0, 1, 3], [0, 2, 4]], [7, 3, 5], dtype)
    assert plain_json.plain(summed) != ours
    assert plain_json.plain(_coo(where, [1, 7, 3, 5], dtype)) != ours


def test_a_hybrid_tensor_is_ordered_by_its_rows():
    """A tensor with dense dimensions (a row of values at each index) is ordered too."""
    dtype = torch.uint16
    where = torch.tensor([[2, 0, 2], [1, 3, 1]])
    rows = torch.tensor([[1, 2], [3, 4], [5, 6]]).to(dtype)
    ours = plain_json.plain(torch.sparse_coo_tensor(where, rows, (4, 5, 2)))
    flipped = torch.sparse_coo_tensor(where.flip(1), rows.flip(0), (4, 5, 2))
    assert plain_json.plain(flipped) == ours


def test_a_summable_dtype_is_still_coalesced():
    """float32 keeps coalesce: an index given twice is summed, so its sum given once agrees."""
    twice = _coo([[1, 0, 1], [2, 0, 2]], [1, 7, 2], torch.float32)
    once = _coo([[0, 1], [0, 2]], [7, 3], torch.float32)
    assert plain_json.plain(twice) == plain_json.plain(once)


def test_float_duplicates_in_another_order_agree():
    """coalesce sums a repeated index's values in their stored order, and a float sum's bits
    follow its terms' order: 1e8 + 1 - 1e8 is 0 in float32, 1e8 - 1e8 + 1 is 1. Two ranks that
    built the same tensor with its duplicates in another order disagreed; they are summed in
    one order now (sorted_entries' first)."""
    where = [[0, 0, 0], [1, 1, 1]]
    ours = plain_json.plain(_coo(where, [1e8, 1, -1e8], torch.float32))
    assert plain_json.plain(_coo(where, [1e8, -1e8, 1], torch.float32)) == ours
    assert plain_json.plain(_coo(where, [1, -1e8, 1e8], torch.float32)) == ours


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint16], ids=str)
def test_a_tensor_of_no_sparse_dimension_is_hashed_in_one_order(dtype):
    """With no sparse dimension every entry's index is one: its linear index, a sum of no
    terms, was the int 0 and sorting it an AttributeError ('int' object has no attribute
    'sort') where 814c8a51 and ca60381d's sort was reached (a float tensor of 2 entries
    coalesced, or one torch sums not)."""
    none = torch.empty(0, 2, dtype=torch.long)
    rows = torch.tensor([[1.0, 2.0], [3.0, 4.0]]).to(dtype)
    ours = plain_json.plain(torch.sparse_coo_tensor(none, rows, (2,)))
    assert plain_json.plain(torch.sparse_coo_tensor(none, rows.flip(0), (2,))) == ours


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint16], ids=str)
def test_a_hybrid_tensor_of_empty_rows_with_a_repeated_index_is_hashed(dtype):
    """A dense dimension of size 0 gives each entry a row of 0 bytes: its value words were read
    by viewing no bytes as int64, a RuntimeError where a repeated index reached them. Such rows
    are all equal, ordered by their index alone."""
    where, rows = torch.tensor([[0, 2, 0]]), torch.zeros(3, 0, dtype=dtype)
    ours = plain_json.plain(torch.sparse_coo_tensor(where, rows, (3, 0)))
    assert plain_json.plain(torch.sparse_coo_tensor(where.flip(1), rows, (3, 0))) == ours
    assert (
        plain_json.plain(torch.sparse_coo_tensor(torch.tensor([[0, 1, 0]]), rows, (3, 0))) != ours
    )


def _coalesces(tensor) -> int:
    """How many times writing ``tensor`` coalesces a tensor (torch's own calls, counted)."""
    names = []

    class Counted(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            names.append(getattr(func, "__name__", ""))
            return func(*args, **(kwargs or {}))

    with Counted():
        plain_json.plain(tensor)
    return names.count("coalesce")


def test_a_summable_tensor_is_sorted_once_and_coalesced_only_where_an_index_repeats():
    """A float tensor with an index repeated was coalesced, sorted, then coalesced again (2M
    entries: 0.59 s where one sort and one coalesce take 0.2 s), and one with none was
    coalesced where a sort gives the same. The sort comes first; only a repeat is summed."""
    where, values = [[0, 2, 0]], [1e8, 1.0, -1e8]
    twice = torch.sparse_coo_tensor(torch.tensor(where), torch.tensor(values), (3,))
    assert _coalesces(twice) == 1
    assert plain_json.plain(twice) == plain_json.plain(twice.coalesce())
    once = torch.sparse_coo_tensor(torch.tensor([[2, 0, 1]]), torch.tensor(values), (3,))
    assert _coalesces(once) == 0
    assert plain_json.plain(once) == plain_json.plain(once.coalesce())


def _zeros(where: list[int], values: list[float], dtype):
    """A 1-D COO tensor of four entries' room, ``values`` (signed zeros) at ``where``."""
    return torch.sparse_coo_tensor(torch.tensor([where]), torch.tensor(values).to(dtype), (4,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn], ids=str)
def test_minus_zero_entries_are_told_from_zero_as_a_dense_tensors_are(dtype):
    """-0.0 and 0.0 are other bytes, as a dense tensor's are (:func:`_array`): a sum of
    repeated -0.0 is -0.0, one with a 0.0 in it 0.0 in either order (IEEE's sum, the CPU's
    coalesce); a dtype with no sum keeps each, in one order. A GPU's coalesce (another order
    of sums, another start) is not run here."""
    minus, plus = (
        plain_json.plain(_zeros([1], [-0.0], dtype)),
        plain_json.plain(_zeros([1], [0.0], dtype)),
    )
    assert minus != plus
    dense = [plain_json.plain(torch.tensor([z]).to(dtype))["values_sha256"] for z in (-0.0, 0.0)]
    assert dense == [minus["values_sha256"], plus["values_sha256"]]
    both = plain_json.plain(_zeros([1, 1], [-0.0, 0.0], dtype))
    assert both == plain_json.plain(_zeros([1, 1], [0.0, -0.0], dtype))
    twice = plain_json.plain(_zeros([1, 1], [-0.0, -0.0], dtype))
    if dtype in _dtypes():  # no sum: each entry kept, -0.0 still told from 0.0
        assert (
            len({str(both), str(twice), str(plain_json.plain(_zeros([1, 1], [0.0, 0.0], dtype)))})
            == 3
        )
    else:
        assert (both, twice) == (plus, minus)
