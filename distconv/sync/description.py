"""What every rank of a job must agree on, and how two ranks' versions are compared.

A job's *description* (:func:`job_description`: the config, the optimizer, each parameter's
name, shape and dtype) is JSON-able. Ranks and shards exchange its :func:`digest`, which is
cheap; where two digests differ, :func:`first_difference` turns the two descriptions into
the sentence the error shows (``optimizer.lr: 0.01 here, 0.02 there``), so a mismatch names
its cause instead of hanging or training two models.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from distconv import plain_json
from distconv.optim import Optimizer
from distconv.parameter import Parameter


def job_description(
    params: Sequence[Parameter], optimizer: Optimizer, config: Mapping[str, Any]
) -> dict[str, Any]:
    """What every rank must agree on: the config, the optimizer, and each parameter's layout."""
    # named as a nested dict's keys are (1 beside "1": "config.1 (int)", no value dropped),
    # sorted as text: keys of mixed types (1 and "lr") do not sort, a bare TypeError at setup
    names = plain_json.key_names(config)
    description = dict(sorted((f"config.{names[k]}", v) for k, v in config.items()))
    description["optimizer"] = optimizer.config()
    description["parameters"] = [[p.name, list(p.shape), str(p.value.dtype)] for p in params]
    return description


def first_difference(
    ours: Mapping[str, Any], theirs: Mapping[str, Any], prefix: str = ""
) -> str | None:
    """The first key (sorted, ``name`` first, numbers as numbers) whose value differs between
    two descriptions, as a sentence, each value by its repr; inside settings that are
    mappings themselves (the optimizer's), the first key there too (``optimizer.lr: 0.01 here,
    0.02 there``; ``optimizer.name`` for two kinds).

    Values differ as the digest sees them (their JSON: ``1`` and ``1.0`` differ, NaN is NaN),
    so descriptions whose digests differ always get a sentence, never None."""
    found = first_differing(ours, theirs, prefix)
    if found is None:
        return None
    where, a, b = found
    return f"{where}: {a!r} here, {b!r} there"


def first_differing(
    ours: Mapping[str, Any], theirs: Mapping[str, Any], prefix: str = ""
) -> tuple[str, Any, Any] | None:
    """Where two descriptions first differ, as :func:`first_difference` finds it, and the two
    values there (``ours``' first): ``("optimizer.lr", 0.01, 0.02)``, for a caller that words
    or cuts the values itself. None where they do not differ."""
    for key in sorted(set(ours) | set(theirs), key=key_order):
        a, b = ours.get(key, "<missing>"), theirs.get(key, "<missing>")
        if (key in ours) != (key in theirs) or _differ(a, b):
            if not prefix and key == "parameters" and isinstance(a, list) and isinstance(b, list):
                return _first_param_differing(a, b)
            if isinstance(a, Mapping) and isinstance(b, Mapping):
                inner = first_differing(a, b, f"{prefix}{key}.")
                if inner is not None:
                    return inner
            return f"{prefix}{key}", a, b
    return None


def key_order(key: Any) -> tuple:
    """``name`` first, then numbers in keys as numbers: ``bucket 2`` before ``bucket 10``; keys
    alike as numbers (``a1``, ``a01``) as text, so every process sorts them the same way."""
    parts = re.split(r"([0-9]+)", str(key))  # text, digits, text, ...: like types line up
    # a run of digits as (how many, which) without leading zeros: its number's order, with no
    # int() to refuse a run over sys.get_int_max_str_digits()
    runs = tuple((len(t.lstrip("0")), t.lstrip("0")) if i % 2 else t for i, t in enumerate(parts))
    return (key != "name", runs, str(key))


def _differ(a: Any, b: Any) -> bool:
    """Whether two values differ as :func:`digest` sees them (``==`` where not JSON-able)."""
    try:
        return plain_json.dumps(a, sort_keys=True) != plain_json.dumps(b, sort_keys=True)
    except (TypeError, ValueError):
        return bool(a != b)


def _first_param_differing(a: list, b: list) -> tuple[str, Any, Any]:
    for i, (pa, pb) in enumerate(zip(a, b)):
        if pa != pb:
            return f"parameter {i}", pa, pb
    return "parameter count", len(a), len(b)


def as_sent(description: Mapping[str, Any]) -> dict[str, Any]:
    """``description`` as another rank receives it, through JSON: like compared with like. A
    value JSON has no form for is written as :func:`~distconv.plain_json.plain` writes it,
    the same on every rank that holds the same (a set sorted, an address taken out)."""
    return json.loads(plain_json.dumps(description, sort_keys=True))


def digest(description: Mapping[str, Any]) -> str:
    """A short SHA-256 of a description (cheap to compare across ranks), a value JSON has no
    form for written as :func:`as_sent` writes it."""
    text = plain_json.dumps(description, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: the settings of a strategy that change what a run computes, recorded where it has them as
#: attributes (:class:`~distconv.sync.mpi.MPISync`'s, :class:`~distconv.sync.ps.PServerSync`'s;
#: ``grad_hook``, MPISync's transform of the reduced gradients, by its name)
SCHEME_SETTINGS = ("mode", "max_staleness", "grad_dtype", "bucket_bytes", "overlap", "grad_hook")


def sync_scheme(sync: Any) -> dict[str, Any]:
    """What a run records of the sync it trained with (the first metrics line, the start line):
    ``{"sync": "pserver", "mode": "async", "max_staleness": 4}``, ``{"sync": "mpi",
    "grad_dtype": "bfloat16", "bucket_bytes": 262144, "overlap": True}``, ``{"sync": "local"}``.

    ``sync`` is the transport's name (:data:`~distconv.sync.TRANSPORTS`), or the class's for a
    strategy of one's own. The settings are the strategy's ``describe()`` where it has one
    that takes no argument and returns a mapping, else those of :data:`SCHEME_SETTINGS` it
    holds; one not known yet (a parameter-server worker's mode before its shards said it) or
    left to the default (``grad_dtype`` None: the gradients' own dtype) is left out, as is a
    method of the strategy; another callable is a setting (a ``functools.partial``, an object
    with ``__call__``). A strategy of one's own may hold anything under these names: a value
    JSON has no form for is written as :func:`~distconv.plain_json.plain` writes it (an
    Enum member as its ``str``: ``Mode.ASYNC``), not a run failed at epoch 1's end; an infinite
    or NaN float as ``"Infinity"`` or ``"NaN"``.

    Raises:
        ValueError: a ``describe()`` holds a setting named ``sync`` (it took the transport's
            name's place: a strategy of one's own recorded as ``mpi``), alike on every rank.
    """
    from distconv.sync import TRANSPORTS  # imports this module: not at the top

    cls = type(sync)
    name = next((k for k, v in TRANSPORTS.items() if _is_class(cls, v)), cls.__qualname__)
    settings = described(sync)
    if settings is None:
        # a static method's getattr is a plain function, no method to _method_of: left out here
        kept_names = [k for k in SCHEME_SETTINGS if not _static_method(sync, k)]
        settings = {k: getattr(sync, k, None) for k in kept_names}
    # the strategy's own method is no setting; any other callable is (a class,
    # grad_dtype=np.float16; a functools.partial or a compressor object, mode=...)
    kept = {k: v for k, v in settings.items() if not _unset(v) and not _method_of(sync, v)}
    text = plain_json.dumps(kept)  # keys written as the job check's are: 1 beside "1" kept
    # an infinite bound as the text "Infinity": the metrics line writes a float one null, and a
    # resume under it then differed from its own line, each resume recording it anew
    written = json.loads(text, parse_constant=str)
    if "sync" in written:  # only a describe() names one: no SCHEME_SETTINGS is "sync"
        raise ValueError(
            f"{cls.__qualname__}.describe() returned a 'sync' setting ({written['sync']!r}): "
            f"the recorded scheme's 'sync' is its transport's name ({name!r}); name it otherwise"
        )
    return {"sync": name, **written}


def _is_class(cls: type, where: str) -> bool:
    """Whether ``cls`` is the class ``module:name`` names (its module or one inside it, where
    the package re-exports it), not a class of one's own of the same name."""
    module, _, name = where.partition(":")
    return cls.__qualname__ == name and (cls.__module__ + ".").startswith(module + ".")


def described(
    sync: Any, otherwise: str = "the sync's scheme is recorded from its attributes"
) -> Mapping[str, Any] | None:
    """``sync.describe()`` where it is the settings' mapping; None for a ``describe`` of one's
    own that means something else (a string, a method taking arguments). An error inside the
    hook is raised: a bug there, a TypeError too, is not a ``describe`` of another meaning.
    ``sync`` may be any object that says what it is so (a ``grad_hook``: ``otherwise`` then
    says how it is described instead, in the warning below).

    Where the signature says nothing (``(*args, **kwargs)``: a decorator without
    ``functools.wraps``; a builtin with none to read), a TypeError may be either: it is warned
    of, naming it, and the attributes are recorded, as for a ``describe`` taking arguments: it
    was raised, and a run whose ``describe`` has another meaning, which recording the scheme
    has no business calling, could not start (the first epoch's tally reads the scheme)."""
    describe = getattr(sync, "describe", None)
    if not callable(describe):
        return None
    bare = _callable_bare(describe)
    if bare is False:
        return None
    try:
        said = describe()
    except TypeError as error:
        if bare:
            raise
        warnings.warn(
            f"{type(sync).__qualname__}.describe() raised TypeError: {error}; its signature "
            "does not say whether it takes arguments (a decorator without functools.wraps?), "
            f"so it is taken for a describe() of another meaning and {otherwise}",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return said if isinstance(said, Mapping) else None


def _callable_bare(function: Any) -> bool | None:
    """Whether ``function``'s signature lets it be called with no argument; None where it says
    nothing: none to read (some builtins), or only ``*args`` and ``**kwargs``."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    kinds = {p.kind for p in signature.parameters.values()}
    if kinds and kinds <= {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}:
        return None
    try:
        signature.bind()
    except TypeError:  # an argument it needs
        return False
    return True


def _method_of(sync: Any, value: Any) -> bool:
    """Whether ``value`` is a method of ``sync`` (or a class method of its class)."""
    return inspect.ismethod(value) and (value.__self__ is sync or value.__self__ is type(sync))


def _static_method(sync: Any, name: str) -> bool:
    """Whether ``sync.<name>`` is a static method of its class (not an attribute of its own
    of that name): one of the strategy's methods, no setting."""
    return isinstance(inspect.getattr_static(sync, name, None), staticmethod)


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value)
