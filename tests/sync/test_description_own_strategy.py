""":func:`~distconv.sync.description.sync_scheme` of a strategy of one's own: what it records
of settings that are classes, callables, or a ``describe()`` (the transports' own schemes:
tests/test_run_scheme.py)."""

from __future__ import annotations

import functools

import pytest

from distconv.optim import create_optimizer
from distconv.sync.description import sync_scheme
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(10)


class _Fast:
    """A codec of one's own."""

    class Codec:
        """One nested in another class, named as another module's ``Codec`` would be."""


class Codec:
    """A codec of the same name, at the module's top."""


def _own(**settings) -> LocalSync:
    """A LocalSync holding ``settings`` as attributes, as a strategy of one's own would."""
    sync = LocalSync(create_optimizer("sgd"))
    for name, value in settings.items():
        setattr(sync, name, value)
    return sync


def test_a_nested_class_is_named_as_its_instance_is():
    """A class was named by ``__name__`` (``Codec``), its instance by ``__qualname__``
    (``_Fast.Codec``): two classes of one short name recorded one scheme."""
    scheme = sync_scheme(_own(grad_dtype=_Fast.Codec, mode=_Fast.Codec()))
    assert scheme["grad_dtype"] == scheme["mode"] == "_Fast.Codec"
    assert sync_scheme(_own(grad_dtype=Codec)) != sync_scheme(_own(grad_dtype=_Fast.Codec))


def _scale(gradient, by):
    return gradient * by


class _Compress:
    """A compressor of one's own: a callable object that says nothing of itself."""

    def __call__(self, gradient):
        return gradient


class _Methods(LocalSync):
    """A strategy whose settings' names are its methods': no settings."""

    def mode(self) -> str:
        return "async"

    @classmethod
    def overlap(cls) -> bool:
        return True

    @staticmethod
    def max_staleness() -> int:
        return 4


def test_a_callable_setting_is_recorded_where_it_sits_and_a_method_is_not():
    """A callable object at the top level (a ``functools.partial``, a codec with
    ``__call__``) was left out as a method is: two compressors recorded one scheme.
    One nested in a setting is written without its address, as at the top."""
    halve, third = (functools.partial(_scale, by=b) for b in (0.5, 1 / 3))
    scheme = sync_scheme(_own(mode=halve, grad_dtype=_Compress(), overlap=[_scale]))
    assert scheme == {
        "sync": "local",
        "mode": {  # its function by its name, its arguments as they are written alone
            "class": "partial",
            "fields": {
                "func": f"<function {__name__}._scale>",
                "args": [],
                "keywords": {"by": 0.5},
            },
        },
        "grad_dtype": "_Compress",
        "overlap": [f"<function {__name__}._scale>"],  # with its module
    }
    assert sync_scheme(_own(mode=halve)) != sync_scheme(_own(mode=third))
    assert sync_scheme(_Methods(create_optimizer("sgd"))) == {"sync": "_Methods"}


def test_a_static_method_named_like_a_setting_is_left_out_as_a_method_is():
    """A static method read through its instance is a plain function, no bound method: it was
    recorded as a setting, ``"max_staleness": "<function _Methods.max_staleness>"``, where a
    method and a class method of that name were left out. An attribute of the
    instance's own of that name is a setting still."""
    sync = _Methods(create_optimizer("sgd"))
    assert sync_scheme(sync) == {"sync": "_Methods"}
    sync.max_staleness = 8
    assert sync_scheme(sync) == {"sync": "_Methods", "max_staleness": 8}


class _Described(LocalSync):
    """A strategy whose ``describe()`` is the scheme's hook: ``broken`` makes a bug in it."""

    broken = False

    def describe(self, verbose: bool = False) -> dict:
        if self.broken:
            return {"mode": "async", "bucket_bytes": 1 << None}  # TypeError: a bug
        return {"mode": "async"}


class _DescribedOtherwise(LocalSync):
    """A ``describe`` of its own meaning, which takes an argument: not the scheme's hook."""

    mode = "sync"

    def describe(self, what: str) -> str:
        return f"a sync for {what}"


def test_a_bug_inside_describe_is_raised_not_taken_for_no_describe():
    """A TypeError was caught as the one a ``describe`` taking arguments raises, so a bug
    inside the hook recorded the attributes' scheme without a word; the
    signature tells the two apart."""
    sync = _Described(create_optimizer("sgd"))
    assert sync_scheme(sync) == {"sync": "_Described", "mode": "async"}
    sync.broken = True
    with pytest.raises(TypeError, match="unsupported operand"):
        sync_scheme(sync)
    other = _DescribedOtherwise(create_optimizer("sgd"))
    assert sync_scheme(other) == {"sync": "_DescribedOtherwise", "mode": "sync"}


class _DescribedByNumber(LocalSync):
    """A ``describe()`` whose keys are written alike by ``str``: ``1`` and ``"1"``."""

    def describe(self) -> dict:
        return {1: "int's", "1": "str's"}


def test_describe_keys_written_alike_are_both_recorded():
    """``sync_scheme`` took ``str`` of each key, so ``1`` and ``"1"`` merged, one value lost;
    they are written as the job check writes them."""
    scheme = sync_scheme(_DescribedByNumber(create_optimizer("sgd")))
    assert scheme == {"sync": "_DescribedByNumber", "1": "str's", "1 (int)": "int's"}


def _logged(method):
    """A decorator without ``functools.wraps``: the method's signature is hidden."""

    def wrapper(*args, **kwargs):
        return method(*args, **kwargs)

    return wrapper


class _WrappedOtherwise(LocalSync):
    """A ``describe`` of another meaning behind such a decorator."""

    mode = "sync"

    @_logged
    def describe(self, what: str) -> str:
        return f"a sync for {what}"


class _WrappedHook(LocalSync):
    """The scheme's hook behind such a decorator."""

    @_logged
    def describe(self) -> dict:
        return {"mode": "async"}


def test_a_describe_whose_signature_says_nothing_is_warned_of_not_raised():
    """``(*args, **kwargs)`` binds with no argument, so a wrapped ``describe(self, what)`` was
    called bare and its TypeError ended the run (before its first step: the first epoch's
    tally reads the scheme); the hook behind the same decorator is still read."""
    sync = _WrappedOtherwise(create_optimizer("sgd"))
    with pytest.warns(RuntimeWarning, match=r"_WrappedOtherwise.describe\(\) raised TypeError"):
        assert sync_scheme(sync) == {"sync": "_WrappedOtherwise", "mode": "sync"}
    assert sync_scheme(_WrappedHook(create_optimizer("sgd"))) == {
        "sync": "_WrappedHook",
        "mode": "async",
    }


class _DescribedAsMPI(LocalSync):
    """A ``describe()`` holding a setting named ``sync``."""

    def describe(self) -> dict:
        return {"sync": "mpi", "mode": "sync"}


def test_a_described_sync_setting_is_refused_not_taken_for_the_transport():
    """``{"sync": name, **settings}`` let a ``describe()``'s ``sync`` replace the transport's
    name: a LocalSync of one's own was recorded as the ``mpi`` transport (and a ``pserver``
    one read as a parameter server's scheme by the start line)."""
    with pytest.raises(ValueError, match=r"_DescribedAsMPI.describe\(\) returned a 'sync'"):
        sync_scheme(_DescribedAsMPI(create_optimizer("sgd")))
