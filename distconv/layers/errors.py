"""A layer's errors: each names the layer (and the part of it) that raised it; one made of a
``ValueError`` raised there is that error's type too, catchable as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from distconv.parameter import Parameter, trainable

T = TypeVar("T")


class LayerError(ValueError):
    """Bad input to a layer; the message names the layer and the shapes."""


class LayerTypeError(LayerError, TypeError):
    """Values of a type the layer cannot compute in (integers where it needs floats); a
    TypeError too, so that a Network names the feed that holds them, as for numpy's own
    casting errors."""


class LayerResultError(LayerTypeError):
    """A layer's ``_forward`` returned no array (an Arg, a list): the layer's own mistake,
    which a Network does not take for integer values fed to it."""


class SkippedBaseInit(AttributeError, TypeError):
    """A base field read on a dataclass layer whose base ``__init__`` never ran: a TypeError,
    as a Network's ``add`` tells it, and an AttributeError, so that ``hasattr`` and
    ``getattr(layer, name, default)`` (copy, IPython, a test's repr probing) answer as for
    any missing attribute instead of raising."""


def told(exc: BaseException) -> str:
    """``str(exc)``, or where an error's own ``__str__`` fails (one of one's own formatting
    what it never set) what Python's traceback shows for it: read to tell whose the error is
    or to name the layer in it, its IndexError came out in place of the error."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001  (any: the error told is the one to raise)
        return f"<{type(exc).__name__}: str() failed>"


class Fails(Protocol):
    """Anything that builds its own LayerError: a layer, or a part of one."""

    def fail(self, message: str) -> LayerError: ...


def checked_shared(owner: Fails, key: str, shared: Any, shape: tuple[int, ...]) -> Parameter:
    """``shared``, a weight given to share, once it is a Parameter of ``shape`` that can train
    (a floating-point one, or a static one); else ``owner.fail`` naming ``key``."""
    if not isinstance(shared, Parameter):  # an array has a shape too, but no grad or name
        raise owner.fail(f"shared {key} must be a Parameter, got {type(shared).__name__}")
    if shared.shape != shape:
        raise owner.fail(f"shared {key} has shape {shared.shape}, needs {shape}")
    try:  # Parameter("w", np.array([[1, 0], [0, 1]])) is int64: backward failed adding floats
        trainable([shared])
    except TypeError as exc:
        raise owner.fail(f"shared {key}: {exc}") from None
    return shared


def checked(owner: Fails, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, a ValueError from it re-raised as ``owner.fail`` (naming it).

    Kernels check shapes and raise plain ValueErrors; layers call them through this so that the
    message also says which layer (and which part of it) was given the bad argument. A
    kernel's own traceback is left out (its message says it all); a function of one's own
    keeps its, chained: the line of it that raised was shown nowhere.
    """
    try:
        return fn(*args, **kwargs)
    except LayerError:
        raise
    except ValueError as exc:
        ours = (getattr(fn, "__module__", None) or "").startswith("distconv.")
        raise named(owner.fail(told(exc)), exc) from (None if ours else exc)


#: the classes :func:`named` made, by (the layer's error class, the error's)
_BOTH: dict[tuple[type, type], type] = {}


def named(error: LayerError, exc: ValueError) -> LayerError:
    """``error``, naming the layer, for ``exc`` raised in it; where ``exc`` is of a subclass
    of ValueError (numpy's ``LinAlgError``, a ``JSONDecodeError``), ``error`` made an instance
    of that class too, its attributes copied: ``except LinAlgError`` around a forward caught
    nothing once the layer named itself. Left as it is where no class can be both (a layout
    the two cannot share, a class that refuses subclasses or whose __new__ hands out another)."""
    key = (type(error), type(exc))
    if key[1] is ValueError or isinstance(exc, LayerError):
        return error
    try:  # its class's own __init_subclass__, metaclass or __new__ run here: any error of
        # theirs ("sealed", a registry's) leaves the layer's as it is, not raised in its place
        both = _BOTH.get(key) or _BOTH.setdefault(key, _both(*key))
        made = both(*error.args)
    except Exception:  # noqa: BLE001  (a layout the two cannot share is a TypeError)
        return error
    if type(made) is not both:  # its __new__ handed out another object (an interned one)
        return error
    made.__dict__.update(vars(exc))  # a JSONDecodeError's pos, notes
    for field, value in _c_fields(exc):  # not in its __dict__: left empty,
        field.__set__(made, value)  # e.object[e.start:e.end] failed on None
    return made


def _c_fields(exc: BaseException) -> list[tuple[Any, Any]]:
    """A UnicodeError's fields, kept in C, not in its ``__dict__``: each read through its
    class's own member descriptor (as Python made it: no property of one's own), with its
    value; none for any other error."""
    for kind in _UNICODE_KINDS:
        if issubclass(type(exc), kind):
            fields = (kind.__dict__[n] for n in ("encoding", "object", "start", "end", "reason"))
            return [(field, field.__get__(exc)) for field in fields]
    return []


#: the errors whose fields are C's own, each its own (its descriptors read only its own)
_UNICODE_KINDS = (UnicodeDecodeError, UnicodeEncodeError, UnicodeTranslateError)


def _both(error_class: type, exc_class: type) -> type:
    """A class of both, shown as ``LayerError[LinAlgError]``: made with the layer's message
    and shown as it (not as ``exc_class``'s __init__ and __str__, which may want more), and
    pickled as :func:`_remade` makes it again."""
    return type(
        f"{error_class.__name__}[{exc_class.__name__}]",
        (error_class, exc_class),
        {
            "__module__": error_class.__module__,
            "__init__": BaseException.__init__,
            "__str__": BaseException.__str__,
            "__reduce__": lambda self: (_remade, (error_class, exc_class, self.args), _state(self)),
        },
    )


def _state(made: BaseException) -> dict[str, Any]:
    """What a pickled error of :func:`_both`'s class is made again with: its ``__dict__`` and
    its C fields (a UnicodeError's: made from its message alone, they came back None)."""
    return {**vars(made), **{field.__name__: value for field, value in _c_fields(made)}}


def _remade(error_class: type, exc_class: type, args: tuple[Any, ...]) -> LayerError:
    """An error of :func:`_both`'s class, unpickled: the classes are made anew in a process."""
    both = _BOTH.get((error_class, exc_class)) or _BOTH.setdefault(
        (error_class, exc_class), _both(error_class, exc_class)
    )
    return both(*args)
