"""How :mod:`distconv.plain_json` hashes a tensor of a dtype numpy has no form for (torch's
bfloat16, float8, complex32): by its bytes, at once, not by its values' JSON text, one Python
float each (about half a second for a million)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from distconv import plain_json

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(60)

#: torch's dtypes numpy cannot take (numpy.asarray refuses them)
_NO_NUMPY = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "complex32")


def _tensor(values, dtype: str):
    return torch.tensor(values).to(getattr(torch, dtype))


@pytest.fixture
def no_tolist(monkeypatch):
    """A tensor's ``tolist`` refused: the slow path, a Python float per element."""

    def refused(self):
        raise AssertionError("tolist called")

    monkeypatch.setattr(torch.Tensor, "tolist", refused)


@pytest.mark.parametrize("dtype", _NO_NUMPY)
def test_a_tensor_numpy_cannot_take_is_hashed_by_its_bytes(dtype, no_tolist):
    tensor = _tensor([[1.5, -2.0, 0.25], [3.0, 0.0, -0.5]], dtype)
    raw = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
    written = plain_json.plain(tensor)
    assert written == {
        "dtype": f"torch.{dtype}",
        "shape": [2, 3],
        "values_sha256": hashlib.sha256(raw).hexdigest(),
    }
    # a strided view of its values agrees with a contiguous copy; another value does not
    assert plain_json.plain(tensor.t().contiguous().t()) == written
    assert plain_json.plain(tensor.t())["values_sha256"] != written["values_sha256"]
    other = tensor.clone()
    other[1, 2] = _tensor([0.5], dtype)[0]
    assert plain_json.plain(other) != written


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_minus_zero_is_told_from_zero_as_before(dtype, no_tolist):
    """Its text wrote ``-0.0`` beside ``0.0``: two ranks holding each still differ."""
    assert plain_json.plain(_tensor([-0.0, 1.0], dtype)) != plain_json.plain(
        _tensor([0.0, 1.0], dtype)
    )


def test_a_bfloat16_tensor_hashes_as_ml_dtypes_numpy_array_of_its_values(no_tolist):
    """The same bytes, the same hash, as a float32 tensor's and array's agree; the dtype's
    name tells the libraries apart as it does there."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = [1.5, -2.0, 0.0078125, -0.0]
    tensor = plain_json.plain(_tensor(values, "bfloat16"))
    array = plain_json.plain(np.array(values, dtype=ml_dtypes.bfloat16))
    assert tensor["values_sha256"] == array["values_sha256"]
    assert (tensor["dtype"], array["dtype"]) == ("torch.bfloat16", "bfloat16")


def test_a_sparse_tensors_bfloat16_values_are_hashed_by_their_bytes(no_tolist):
    sparse = torch.sparse_coo_tensor(torch.tensor([[2, 0]]), _tensor([1.5, -2.0], "bfloat16"), (4,))
    values = _tensor([-2.0, 1.5], "bfloat16")  # coalesced: index order
    written = plain_json.plain(sparse)["values_sha256"]
    assert written == plain_json.plain(values)["values_sha256"]


def test_a_lazy_conjugate_is_hashed_as_its_equal_copy(no_tolist):
    """numpy refuses a tensor with its conjugate bit set: it was written by its values' text,
    and disagreed with an equal tensor written by its bytes."""
    tensor = torch.tensor([1 + 2j, -3j], dtype=torch.complex64)
    assert plain_json.plain(tensor.conj()) == plain_json.plain(tensor.conj().resolve_conj())
