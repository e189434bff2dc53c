"""A job description whose config holds a dict with keys of mixed types, or keys JSON has no
form for (a tuple), is written and compared (:func:`~distconv.plain_json.keyed`): it raised a
bare TypeError at setup naming neither the key nor the rank (the real two-rank run:
tests/mpi/test_hash_seed_job_check.py)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.description import as_sent, digest, first_difference, job_description

pytestmark = pytest.mark.timeout(10)


def _described(config: dict) -> dict:
    return as_sent(job_description([Parameter("w", np.zeros(2))], create_optimizer("sgd"), config))


def test_keys_of_mixed_types_and_tuple_keys_are_written_as_text_and_compared():
    """``sort_keys`` compared 1 with "fc" (TypeError: '<' not supported) and refused a tuple
    (keys must be str, int, ...): now each key is written as JSON writes it, the same
    whatever order the dict was built in, and a difference is named under its key."""
    lr = {1: 0.1, "fc": 0.2, ("conv", 2): 0.3}
    ours = _described({7: "top", "lr": lr})
    assert ours["config.lr"] == {"1": 0.1, "fc": 0.2, '["conv", 2]': 0.3}
    assert ours["config.7"] == "top"
    built_backwards = _described({"lr": dict(reversed(lr.items())), 7: "top"})
    assert digest(built_backwards) == digest(ours)
    theirs = _described({7: "top", "lr": {**lr, ("conv", 2): 0.5}})
    assert digest(theirs) != digest(ours)
    assert first_difference(ours, theirs) == 'config.lr.["conv", 2]: 0.3 here, 0.5 there'


def test_a_key_written_like_another_key_of_its_dict_is_kept_apart_by_its_type():
    """1 and "1" are both written "1": one would hide the other's value from the check."""
    ours = as_sent({"config.x": {1: "a", "1": "b"}})
    assert ours == {"config.x": {"1": "b", "1 (int)": "a"}}
    assert digest({"config.x": {"1": "b", 1: "a"}}) == digest({"config.x": {1: "a", "1": "b"}})
    assert digest({"config.x": {1: "a", "1": "b"}}) != digest({"config.x": {1: "c", "1": "b"}})


def test_a_config_that_holds_itself_is_refused_as_json_refuses_it():
    """The keys are written by a walk of the value before json's: it must refuse a cycle as
    json did, not recurse to Python's limit."""
    looped: list = [1]
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular reference detected"):
        as_sent({"config.x": looped})
    shared = [1, 2]  # the same list twice is no cycle
    assert as_sent({"config.x": [shared, {"k": shared}]}) == {"config.x": [[1, 2], {"k": [1, 2]}]}


def test_a_config_key_written_like_another_is_kept_apart_at_the_top_too():
    """``job_description`` named the config's own keys by ``str``: ``1`` and ``"1"`` both
    became ``config.1`` and one value was dropped without a word, so two ranks that differ
    there agreed."""
    ours = _described({1: "a", "1": "b"})
    assert (ours["config.1"], ours["config.1 (int)"]) == ("b", "a")
    assert digest(ours) == digest(_described({"1": "b", 1: "a"}))
    theirs = _described({1: "c", "1": "b"})
    assert first_difference(ours, theirs) == "config.1 (int): 'a' here, 'c' there"


def test_keys_the_rule_cannot_tell_apart_are_kept_apart_not_refused():
    """``"1 (int)"`` beside ``1`` and ``"1"``: one text for two keys, neither dropped. It was
    a ValueError, raised where the description is written: on the one rank whose config held
    the pair, before the job check's exchange, which the other ranks then waited in (600 s
    under mpiexec, where the error was caught; the real run: test_hash_seed_job_check). Each
    key is written, the same whatever order the dict came in, the rest named as before."""
    pair = {1: "a", "1": "b", "1 (int)": "c"}
    written = as_sent({"config.x": pair})["config.x"]
    assert written == {"1 (builtins.int)": "a", "1": "b", "1 (int)": "c"}
    assert as_sent({"config.x": dict(reversed(pair.items()))})["config.x"] == written
    nans = {float("nan"): 1, float("nan"): 2, "NaN (builtins.float) 2": 3}
    named = {"NaN (builtins.float)": 1, "NaN (builtins.float) 3": 2, "NaN (builtins.float) 2": 3}
    assert as_sent({"x": nans})["x"] == named
    top = _described({1: "a", "1": "b", "1 (int)": "c"})
    assert [top[k] for k in ("config.1 (builtins.int)", "config.1", "config.1 (int)")] == [*"abc"]


class _Settings(Mapping):
    """A Mapping of one's own with no text of its own: its str is its class's name only."""

    def __init__(self, **items):
        self._items = items

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)


def test_a_mapping_that_is_no_dict_is_walked_not_written_as_its_text():
    """json wrote a MappingProxyType or a Mapping of one's own by ``str``: an object's address
    or a set's hash order in it differed between ranks, and one with no text of its own was
    its class's name, so two contents agreed."""
    ours = _described({"lr": _Settings(fc=0.1, conv=0.2)})
    assert ours["config.lr"] == {"conv": 0.2, "fc": 0.1}
    theirs = _described({"lr": _Settings(fc=0.1, conv=0.3)})
    assert first_difference(ours, theirs) == "config.lr.conv: 0.2 here, 0.3 there"
    proxy = as_sent({"config.x": MappingProxyType({1: {3, 1, 2}, "1": None})})
    assert proxy == {"config.x": {"1": None, "1 (int)": [1, 2, 3]}}


def test_a_large_array_is_compared_by_all_its_values_not_its_summarised_text():
    """An array in a config was written as its str, which summarises one of over 1000
    elements (``[0. 0. 0. ... 0. 0. 0.]``): two that differ only in the middle agreed. It is
    written as its dtype, its shape and a hash of its bytes, of a bounded length."""
    ours, middle = np.zeros(5000, np.float32), np.zeros(5000, np.float32)
    middle[2500] = 1
    assert digest(_described({"mask": ours})) != digest(_described({"mask": middle}))
    sent = _described({"mask": ours})["config.mask"]
    assert sent["dtype"] == "float32" and sent["shape"] == [5000]
    assert len(sent["values_sha256"]) == 64
    assert sent == _described({"mask": ours[::-1].copy()[::-1]})["config.mask"]  # strided
    assert sent != _described({"mask": ours.astype(np.float64)})["config.mask"]
    other_shape = _described({"mask": np.zeros(4999, np.float32)})
    assert first_difference(_described({"mask": ours}), other_shape) == (
        "config.mask.shape: [5000] here, [4999] there"
    )
    objects = np.array([{3, 1, 2}, None], dtype=object)
    assert digest(_described({"o": objects})) == digest(_described({"o": objects.copy()}))


class _DeviceArray:
    """A stand-in for a cupy array (none is installed here): device memory, no ``__array__``
    (cupy refuses the implicit copy), read on the host by ``.get()``."""

    __cuda_array_interface__: dict = {}

    def __init__(self, values: np.ndarray):
        self._values = values
        self.dtype, self.shape = values.dtype, values.shape

    def __str__(self) -> str:
        return str(self._values)

    def get(self) -> np.ndarray:
        return self._values.copy()


def test_a_torch_or_device_array_is_compared_by_all_its_values_not_its_summarised_text():
    """A torch tensor (or a cupy array) in a config was written as its str, summarised past
    1000 elements (``tensor([0., 0., 0.,  ..., 0., 0., 0.])``): two that differ only in the
    middle agreed. It is written as a numpy array is, read on the host without importing its
    library: a tensor that needs a gradient, one transposed, a bfloat16 one (numpy has no
    such dtype: hashed by its values' JSON text)."""
    torch = pytest.importorskip("torch")
    middle = torch.zeros(5000)
    middle[2500] = 1
    ours = _described({"mask": torch.zeros(5000)})["config.mask"]
    assert ours != _described({"mask": middle})["config.mask"]
    assert ours["dtype"] == "torch.float32" and ours["shape"] == [5000]
    assert ours == _described({"mask": torch.zeros(5000, requires_grad=True)})["config.mask"]
    square = torch.arange(6.0).reshape(2, 3)
    assert (
        _described({"m": square.t()})["config.m"]
        == _described({"m": square.t().contiguous()})["config.m"]
    )
    half, half_middle = torch.zeros(5000, dtype=torch.bfloat16), middle.to(torch.bfloat16)
    written = _described({"h": half})["config.h"]
    assert written["dtype"] == "torch.bfloat16"
    assert written != _described({"h": half_middle})["config.h"]
    assert written == _described({"h": torch.zeros(5000, dtype=torch.bfloat16)})["config.h"]
    on_device = _described({"d": _DeviceArray(np.zeros(5000))})["config.d"]
    assert on_device == _described({"d": np.zeros(5000)})["config.d"]
    device_middle = _DeviceArray(middle.numpy().astype(np.float64))
    assert on_device != _described({"d": device_middle})["config.d"]


class _Aug:
    """An augmentation of one's own: attributes, no str or repr of its own."""

    def __init__(self, p: float):
        self.p = p
        self.owner: _Aug | None = None


class _Slotted:
    """The same, its attributes in ``__slots__`` (one of them private: mangled, not walked)."""

    __slots__ = ("p", "__seed")

    def __init__(self, p: float, seed: int):
        self.p, self.__seed = p, seed


@dataclasses.dataclass
class _Crop:
    """A dataclass in a config: its repr summarises a large array, writes a set unsorted."""

    mask: np.ndarray
    skip: set


def test_a_dataclass_or_an_object_without_a_text_is_compared_by_its_fields():
    """A dataclass was compared by its repr: a large array in it summarised (two masks that
    differ in the middle agreed), a set in its rank's hash order (two ranks that agree were
    refused). An object whose class has no str or repr of its own was its class's name
    alone: ``_Aug(p=0.1)`` and ``_Aug(p=0.9)`` agreed at the job check and at a resume. Both
    are their class's name and their fields, walked as any value; an object that holds
    itself is written, its back reference as ``"..."``; one holding nothing is its name."""
    middle = np.zeros(5000)
    middle[2500] = 1
    ours = _described({"crop": _Crop(np.zeros(5000), {"fc", "conv1", "conv2"})})
    assert ours["config.crop"]["class"] == "_Crop"
    assert ours["config.crop"]["fields"]["skip"] == ["conv1", "conv2", "fc"]
    theirs = _described({"crop": _Crop(middle, {"fc", "conv1", "conv2"})})
    assert first_difference(ours, theirs).startswith("config.crop.fields.mask.values_sha256: ")
    low, high = _described({"aug": _Aug(0.1)}), _described({"aug": _Aug(0.9)})
    assert first_difference(low, high) == "config.aug.fields.p: 0.1 here, 0.9 there"
    slotted = _described({"aug": _Slotted(0.1, 7)})["config.aug"]
    assert slotted == {"class": "_Slotted", "fields": {"p": 0.1}}  # a private one left out
    looped = _Aug(0.1)
    looped.owner = looped
    written = _described({"aug": looped})["config.aug"]["fields"]
    assert written == {"owner": {"class": "_Aug", "fields": "..."}, "p": 0.1}
    assert _described({"aug": object.__new__(_Aug)})["config.aug"] == "_Aug"


def test_a_tensor_with_no_values_on_the_host_is_written_by_its_text_not_refused():
    """A sparse, a meta or a quantized tensor in a config failed setup (and a Trainer's
    start) with a bare RuntimeError, ``Cannot access data pointer of Tensor that doesn't
    have storage``, from reading its values to hash them: it is written by its str, as before
    tensors were hashed. A nested tensor's ``shape`` raised (``NestedTensorImpl doesn't
    support sizes``) in asking whether it is an array."""
    torch = pytest.importorskip("torch")
    sparse = torch.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,))  # by its content
    assert _described({"adjacency": sparse})["config.adjacency"]["layout"] == "torch.sparse_coo"
    assert "device='meta'" in _described({"m": torch.empty(3, device="meta")})["config.m"]
    quantized = torch.quantize_per_tensor(torch.zeros(3), 0.1, 0, torch.qint8)
    assert "qint8" in _described({"q": quantized})["config.q"]
    with warnings.catch_warnings():  # torch's: the nested tensor API is a prototype
        warnings.simplefilter("ignore")
        nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    assert _described({"n": nested})["config.n"].startswith("nested_tensor([")
