""":func:`~distconv.sync.description.sync_scheme` of a strategy of one's own: what it records
of settings that are classes, callables, or a ``describe()`` (the transports' own schemes:
tests/test_run_scheme.py)."""

from __future__ import annotations

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
    (``_Fast.Codec``): two classes of one short name recorded one scheme (review k521)."""
    scheme = sync_scheme(_own(grad_dtype=_Fast.Codec, mode=_Fast.Codec()))
    assert scheme["grad_dtype"] == scheme["mode"] == "_Fast.Codec"
    assert sync_scheme(_own(grad_dtype=Codec)) != sync_scheme(_own(grad_dtype=_Fast.Codec))
