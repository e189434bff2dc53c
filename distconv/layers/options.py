"""A layer's arguments bound before anything is built, refused naming the class the user called.

Both a constructor's own arguments (:func:`checked_arguments`) and the options it hands on to a
method of its own (a FullyConnected subclass's ``_configure``, a convolution's ``_build``:
:func:`options_problem`). Python's own errors named the function that defines them
("Convolution.__init__() missing ...", "ConvNd._build() got an unexpected keyword argument"),
not the class the user called, counted ``self`` among the positional arguments, and said
neither the cause nor the way out."""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar

Init = TypeVar("Init", bound=Callable[..., None])

#: the kinds of parameter a method takes positionally
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
#: the kinds of parameter an option may be given by name
_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
#: the methods a layer's constructor hands the options it does not take itself on to
#: (FullyConnected's ``_configure``, a convolution's ``_build``): asked, when a required
#: argument is missing and the constructor never runs, which keywords nothing takes
_OPTION_TAKERS = ("_configure", "_build")
#: how close a keyword must be to a name to be offered as what was meant
_CLOSE = 0.75


def options_problem(method: Callable[..., Any], /, *args: Any, **kwargs: Any) -> str | None:
    """Why ``method(*args, **kwargs)`` would fail to bind, in Python's words without the
    method's name and with the way out where there is one, or None.

    ``method`` is positional only: an option may be named so, as SelectiveFullyConnected's is.
    Bound, not called: nothing is built (no weight drawn) before the error.
    """
    return _bind_problem(inspect.signature(method), method, args, kwargs)


def checked_arguments(init: Init) -> Init:
    """Wrap a constructor so that arguments it cannot bind are a TypeError naming the class
    called (``Conv2D: missing required argument: 'kernel_size'``), not the class defining
    ``init``, and counting what the user passed, not ``self``. Bound before ``init`` runs, so
    nothing is built; help() still shows ``init``'s signature."""
    signature = inspect.signature(init)
    names = positional_names(init)[1:]  # self is not the user's to pass

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        problem = _bind_problem(signature, init, (self, *args), kwargs, _option_taker(self))
        if problem is not None:
            if "too many positional arguments" in problem:
                problem = too_many_positional(names, len(args))
            raise TypeError(f"{type(self).__name__}: {problem}")
        init(self, *args, **kwargs)

    return checked  # type: ignore[return-value]


def too_many_positional(names: tuple[str, ...], given: int) -> str:
    """The refusal of ``given`` positional arguments where only ``names`` are taken so."""
    return (
        f"takes at most {len(names)} positional arguments ({', '.join(names)}), got {given}; "
        "give the rest by keyword"
    )


def positional_names(method: Callable[..., Any]) -> tuple[str, ...]:
    """The names ``method`` takes positionally, in order."""
    params = inspect.signature(method).parameters.values()
    return tuple(p.name for p in params if p.kind in _POSITIONAL)


def _option_taker(owner: Any) -> Callable[..., Any] | None:
    """The method ``owner``'s constructor hands its other options on to, or None."""
    return next((getattr(owner, n) for n in _OPTION_TAKERS if hasattr(owner, n)), None)


def _bind_problem(
    signature: inspect.Signature,
    method: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    taker: Callable[..., Any] | None = None,
) -> str | None:
    """Why ``args`` and ``kwargs`` do not bind to ``signature`` (``method``'s), with every
    missing argument named (Python's binding names the first) and the way out, or None.
    ``taker``: the method ``method`` hands the keywords it does not take on to (its
    ``**options``), asked which of them nothing takes when a required argument is missing."""
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        problem = str(exc)
    else:
        return None
    if problem.startswith("missing a required"):  # 3.12 says "required keyword-only" too
        try:
            bound = signature.bind_partial(*args, **kwargs).arguments
        except TypeError as exc:  # a keyword it takes by no name: the misspelling, mostly
            return str(exc) + _way_out(str(exc), method, len(args))
        missing = [
            p.name
            for p in signature.parameters.values()
            if p.default is p.empty and p.kind in _NAMED + _POSITIONAL and p.name not in bound
        ]
        listed = ", ".join(map(repr, missing))
        problem = f"missing required argument{'s' * (len(missing) > 1)}: {listed}"
        return (
            problem
            + _misspelt(missing, kwargs, signature)
            + _unexpected(missing, kwargs, signature, taker)
        )
    return problem + _way_out(problem, method, len(args))


def _misspelt(missing: list[str], kwargs: dict[str, Any], signature: inspect.Signature) -> str:
    """The keywords given that no parameter takes by name and that are close to a ``missing``
    one (``kernal_size=`` for ``kernel_size``), as the way out, or "": a misspelt required
    argument is otherwise refused as missing, and the user sees no sign of what they typed."""
    taken = _named(signature)
    close = [
        f"got {key}=: did you mean {found[0]}=?"
        for key in kwargs
        if key not in taken and (found := difflib.get_close_matches(key, missing, 1, _CLOSE))
    ]
    return f" ({'; '.join(close)})" if close else ""


def _unexpected(
    missing: list[str],
    kwargs: dict[str, Any],
    signature: inspect.Signature,
    taker: Callable[..., Any] | None,
) -> str:
    """The keywords given that neither ``signature`` nor ``taker`` (the method it hands its
    ``**options`` on to) takes, each with the name it is close to, or "": with a required
    argument missing the constructor never runs to refuse them, and ``actt=`` for ``act=``
    went unnamed until the missing argument was given. Those close to a ``missing`` argument
    are named by :func:`_misspelt` already."""
    if taker is None or _takes_any_keyword(taker):
        return ""
    takes = _named(signature) | _named(inspect.signature(taker))
    unknown = [
        key
        for key in kwargs
        if key not in takes and not difflib.get_close_matches(key, missing, 1, _CLOSE)
    ]
    if not unknown:
        return ""
    close = {
        key: found[0]
        for key in unknown
        if (found := difflib.get_close_matches(key, sorted(takes - {"self"}), 1, _CLOSE))
    }
    if len(unknown) == 1:
        meant = f" (did you mean {close[unknown[0]]!r}?)" if close else ""
        return f"; got an unexpected keyword argument {unknown[0]!r}{meant}"
    meant = ", ".join(f"{found!r} for {key!r}" for key, found in close.items())
    listed = ", ".join(map(repr, unknown))
    return f"; got unexpected keyword arguments {listed}" + (
        f" (did you mean {meant}?)" * bool(close)
    )


def _named(signature: inspect.Signature) -> set[str]:
    """The names ``signature`` takes a keyword by."""
    return {p.name for p in signature.parameters.values() if p.kind in _NAMED}


def _takes_any_keyword(method: Callable[..., Any]) -> bool:
    """Whether ``method`` has a ``**kwargs``: then no keyword is unknown to it."""
    kinds = (p.kind for p in inspect.signature(method).parameters.values())
    return inspect.Parameter.VAR_KEYWORD in kinds


def _way_out(problem: str, method: Callable[..., Any], given: int) -> str:
    """What to do about ``problem`` of ``method`` called with ``given`` positional arguments:
    an option given twice is given once; a misspelt one is named as the option it is close to
    (of ``method``, or of the constructor of the object it is bound to); "" where there is
    nothing to add."""
    if match := re.search(r"multiple values for argument '(\w+)'", problem):
        return f" (given positionally and as {match[1]}=: give it once)"
    match = re.search(r"unexpected keyword argument '(\w+)'", problem)
    if match is None:
        return ""
    if meant := _var_positional_meant(method, match[1], given):  # Reshape(shape=(C, H, W))
        return f" ({meant} is given positionally, not by keyword)"
    owner = getattr(method, "__self__", None)
    takers = [method] + ([type(owner).__init__] if owner is not None else [])
    names = set().union(*(_named(inspect.signature(m)) for m in takers))
    close = difflib.get_close_matches(match[1], sorted(names - {"self"}), 1, _CLOSE)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _var_positional_meant(method: Callable[..., Any], keyword: str, given: int) -> str | None:
    """The name of ``method``'s ``*args`` (whose values are given positionally) where
    ``keyword`` means it: that name, or, where ``given`` positional arguments left the
    ``*args`` empty, one close to it (``shap=``) or ending in ``_`` and it (Keras'
    ``target_shape=`` for Reshape's ``*shape``; not Keras' ``input_shape=`` beside the sizes,
    ``Reshape(3, 4, input_shape=(12,))``, which were given positionally); else None."""
    params = inspect.signature(method).parameters.values()
    before = sum(p.kind in _POSITIONAL for p in params)  # taken before the *args
    for p in params:
        if p.kind is not inspect.Parameter.VAR_POSITIONAL or keyword != p.name and given > before:
            continue
        close = difflib.get_close_matches(keyword, [p.name], 1, _CLOSE)
        if close or keyword.endswith(f"_{p.name}"):
            return p.name
    return None
