"""Wrong argument types are refused in the user's words: the argument, what was given and the
fix. Each of these was Python's or numpy's words (``cannot convert dictionary update sequence
element #0``, ``data type 'float33' not understood``, ``'NoneType' object has no attribute
'shape'``), a bound the value reads as meeting (``lr must satisfy 0.0 < lr, got '0.1'``), or
taken without a word (``to_device(a, "cuda")`` stayed on the host, ``progress="no"`` drew a
bar)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distconv import backend
from distconv.arg import Arg
from distconv.backend import BackendError, device_from_env, device_name, resolve_dtype, to_device
from distconv.layers import FullyConnected
from distconv.optim import OptimizerConfigError, create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from distconv.trainer_args import check_progress, run_config
from tests.test_run_scheme import _small_net

pytestmark = pytest.mark.timeout(60)


def _trainer(**kwargs):
    return Trainer(_small_net(), LocalSync(create_optimizer("sgd")), 2, progress=False, **kwargs)


# -- config --------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [[1], "data=mnist", 3])
def test_a_config_that_is_no_mapping_is_refused_naming_it(config):
    said = rf"^config must be a mapping .*vars\(args\).*, got {type(config).__name__}$"
    with pytest.raises(TypeError, match=said):
        _trainer(config=config)


def test_a_mapping_config_and_none_are_taken():
    assert run_config(None, seed=0) == {"seed": 0}
    assert _trainer(config={"data": "mnist"}).config["data"] == "mnist"


# -- dtype ---------------------------------------------------------------------------------------
def test_an_unknown_dtype_names_the_argument_and_the_types_one_trains_in():
    said = r"dtype='float33' is no data type numpy knows; give one of float16, float32, float64"
    with pytest.raises(TypeError, match="^Trainer's " + said):
        _trainer(dtype="float33")
    layer_said = r"^FullyConnected 'fc': weight: " + said
    with pytest.raises(TypeError, match=layer_said):
        FullyConnected(4, 3, dtype="float33", name="fc")
    with pytest.raises(TypeError, match=r"^weight dtype=\[1\] is no data type"):
        resolve_dtype([1], "weight dtype")
    assert resolve_dtype("f4") == np.float32 and resolve_dtype(None) == np.float64


# -- optimizer hyperparameters -------------------------------------------------------------------
@pytest.mark.parametrize(
    "lr,got",
    [
        ("0.1", r"got str '0\.1'; convert it first: float\('0\.1'\)$"),
        (True, r"got bool True$"),
        (None, r"got None$"),
    ],
    ids=["str", "bool", "None"],
)
def test_a_rate_that_is_no_number_is_told_it_must_be_one(lr, got):
    with pytest.raises(OptimizerConfigError, match=r"lr must be a number \(0\.0 < lr\), " + got):
        create_optimizer("sgd", lr=lr)


def test_a_number_out_of_range_is_still_told_its_bound():
    with pytest.raises(OptimizerConfigError, match=r"lr must satisfy 0\.0 < lr, got -1$"):
        create_optimizer("sgd", lr=-1)
    assert create_optimizer("sgd", lr=np.float32(0.5)).lr == 0.5


# -- an Arg of ids -------------------------------------------------------------------------------
def test_an_arg_of_ids_says_it_has_no_shape_or_gradient():
    ids = Arg(ids=np.array([1, 2]))
    with pytest.raises(AttributeError, match=r"^this Arg holds ids, no values: it has no shape"):
        _ = ids.shape
    with pytest.raises(AttributeError, match=r"^this Arg holds ids, no values: it has no grad"):
        _ = ids.grad
    assert not ids.has_grad and ids.batch_size == 2 and repr(ids) == "Arg(value=None, ids=2)"
    with pytest.raises(AttributeError, match=r"^this Arg holds no values: it has no shape$"):
        _ = Arg().shape
    values = Arg(np.ones((2, 3)))
    assert values.shape == (2, 3) and values.grad.shape == (2, 3) and values.has_grad


# -- devices -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cuda", "GPU0", "", 1])
def test_to_device_refuses_a_name_that_is_no_device(name):
    said = rf"^device must be one of \('cpu', 'gpu'\) \(any case\), got {re.escape(repr(name))}$"
    with pytest.raises(BackendError, match=said):
        to_device(np.zeros(2), name)


def test_a_device_name_is_taken_in_any_case_everywhere(monkeypatch):
    assert device_name(" GPU ") == "gpu" and device_name("Cpu") == "cpu"
    backend.set_device("CPU")
    assert type(to_device([1.0], "CPU")) is np.ndarray and type(to_device([1.0])) is np.ndarray
    monkeypatch.setenv("DISTCONV_DEVICE", "Cpu")
    assert device_from_env() == "cpu"
    monkeypatch.setenv("DISTCONV_DEVICE", "cuda")
    with pytest.raises(BackendError, match=r"^DISTCONV_DEVICE must be one of .*, got 'cuda'$"):
        device_from_env()
    monkeypatch.delenv("DISTCONV_DEVICE")
    assert device_from_env() == "cpu"


def test_set_device_refuses_an_unknown_name_naming_it():
    with pytest.raises(BackendError, match=r"^device must be one of .*, got 'tpu'$"):
        backend.set_device("tpu")


# -- progress ------------------------------------------------------------------------------------
@pytest.mark.parametrize("progress", ["yes", "no", 1, 0])
def test_a_progress_that_is_no_bool_is_refused(progress):
    with pytest.raises(TypeError, match=rf"^progress must be True, False or None .*{progress!r}$"):
        check_progress(progress)


def test_a_trainer_refuses_a_progress_that_is_no_bool():
    with pytest.raises(TypeError, match=r"^progress must be True, False or None .*'yes'$"):
        Trainer(_small_net(), LocalSync(create_optimizer("sgd")), 2, progress="yes")


@pytest.mark.parametrize("progress", [True, False, None])
def test_a_bool_progress_or_none_is_taken(progress):
    check_progress(progress)
