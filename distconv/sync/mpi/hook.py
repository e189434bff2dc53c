"""What :class:`~distconv.sync.mpi.MPISync`'s ``grad_hook`` is given besides the gradients:
the count they divide by to give their means (:func:`mean_divisor`), and the refusal, at setup,
of a layout for which there is none (:func:`refuse_mixed_layout`); and what the job check
compares of the hook itself (:func:`hook_description`).
"""

from __future__ import annotations

import numbers
import types
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from distconv.plain_names import attribute, call_fields, code_name, public_attributes
from distconv.sync.base import SyncError
from distconv.sync.description import described
from distconv.sync.errors import JobRefused
from distconv.sync.mpi.buckets import Bucket


class HookRefused(JobRefused):
    """A ``grad_hook`` on a job whose buckets hold sums beside averages, refused at setup once
    the buckets are laid out: they are the same on every rank (the job check compared the
    parameters' dtypes and ``grad_dtype``), so every rank raises it alike, none waiting. So too
    at ``start_step``, where it laid them out anew for a parameter cast (frozen, unfrozen)
    since, before the step's check is posted: nothing is open, and a rank that cast alone is
    met by the others' checks at its close's last exchange."""

    raised_alike = True


def mixed_sums(buckets: Sequence[Bucket]) -> str | None:
    """Why no one count gives the means of ``buckets``' gradients, naming the dtypes of those
    that hold sums and of those that carried averages (:attr:`~.buckets.Bucket.averages`); None
    where every bucket holds one kind."""
    kinds = {
        k: sorted({str(b.host.dtype) for b in buckets if b.averages == k}) for k in (True, False)
    }
    if not all(kinds.values()):
        return None
    return (
        f"grad_hook: the gradients are sums in some buckets ({', '.join(kinds[False])}) and "
        f"averages in others ({', '.join(kinds[True])}: cast to grad_dtype or 16-bit), so "
        "no one count gives their means; give every parameter one dtype, or a 16-bit "
        "grad_dtype, with which every bucket averages"
    )


def refuse_mixed_layout(hook: Callable[..., Any] | None, buckets: Sequence[Bucket]) -> None:
    """At setup, once ``buckets`` are laid out, and at each ``start_step``, before its check
    is posted: refuse a ``hook`` they cannot serve.

    Raises:
        HookRefused: a hook, and buckets holding sums beside averages (:func:`mixed_sums`),
            alike on every rank, before any step.
    """
    said = None if hook is None else mixed_sums(buckets)
    if said is not None:
        raise HookRefused(said)


def mean_divisor(buckets: Sequence[Bucket], total: int) -> int:
    """What a ``grad_hook`` divides the gradients by to have their means: ``total`` (the
    step's global examples) where the buckets hold sums, 1 where they carried averages (a
    ``grad_dtype`` cast, 16-bit gradients: :attr:`~.buckets.Bucket.averages`), so that a clip
    by the mean's norm reads one quantity on every wire.

    Setup refuses a layout of both kinds (:func:`refuse_mixed_layout`), and so does each
    ``start_step``, which lays the buckets out anew without a setup where a parameter was
    frozen, unfrozen or cast since (a float16 one frozen at setup, unfrozen beside float64);
    this asks again, in case.

    Raises:
        SyncError: some buckets hold sums and others averages (parameters of several dtypes:
            16-bit beside wider, or some cast to the wire and others of its dtype), naming
            which: no one divisor gives every mean; raised before any update, on every rank.
    """
    said = mixed_sums(buckets)
    if said is not None:
        raise SyncError(said)
    return 1 if any(b.averages for b in buckets) else total


def hook_description(hook: Callable[..., Any] | None, sync: Any = None) -> Any:
    """What setup's job check compares of ``hook`` (None: no hook), the hook of ``sync``, so
    that ranks given different hooks are refused at setup, naming where they differ, and ranks
    running one script with one configuration agree:

    - an object whose ``describe()`` returns a mapping: its class (module and qualified name)
      and that mapping, as it says what it is (and nothing else of it is read);
    - a Python function: its module, qualified name and first line, and the plain values of
      its public defaults and closure (:func:`_plain`; a cell its code rebinds, a count of
      calls, by its type's name alone: :func:`~distconv.plain_names.closure_values`);
    - a ``functools.partial``: its function so, and its arguments' plain values (a private
      keyword, ``_rank=rank``, left out);
    - a bound method: its function so, and the object it is bound to as below;
    - any other object: its class and the plain values of its public attributes (its
      settings; a private one, a name starting with ``_``, is its running state: a last norm);
      but ``sync`` itself (a method of a sync of one's own; the sync as its own hook) by its
      class, and its ``describe()`` where it has one: its public attributes are its rank, its
      counters and timings, another on each rank, and its settings, which the job check
      compares already;
    - a built-in function: its module and name.

    No digest of the code: the same source compiles to other bytecode under another Python,
    and ranks of one job may run two. Nor a value that may change with use or differs by host
    (a list, an object, a path): by its type's name alone.
    """
    if hook is None:
        return None
    if isinstance(hook, partial):
        args = [_plain(a) for a in hook.args]
        # a private keyword left out, as a default or an attribute is: the way the docs give
        # a value meant to differ by rank (``_rank=rank``), compared, refused that job
        keywords = {k: _plain(v) for k, v in hook.keywords.items() if k[:1] != "_"}
        return {"partial": hook_description(hook.func, sync), "args": args, "keywords": keywords}
    if isinstance(hook, types.MethodType):
        return {
            "method": hook_description(hook.__func__, sync),
            "self": _object(hook.__self__, sync),
        }
    if isinstance(hook, types.FunctionType):
        fields = call_fields(hook) or {}
        found: dict[str, Any] = {"function": f"{hook.__module__}.{hook.__qualname__}"}
        found["line"] = hook.__code__.co_firstlineno
        for kind in ("defaults", "closure"):
            if fields.get(kind):
                found[kind] = {k: _plain(v) for k, v in fields[kind].items()}
        return found
    return code_name(hook) or _object(hook, sync)


def _object(value: Any, sync: Any = None) -> dict[str, Any]:
    """An object as :func:`hook_description` writes it: its class, then its ``describe()`` or
    the plain values of its public attributes (none of ``sync``'s). Its ``describe`` is looked
    up as Python's own lookup finds it (:func:`~distconv.plain_names.attribute`), never through
    its class's ``__getattr__``: one answering from a dict of its own raised ``KeyError:
    'describe'`` on every rank, failing a job whose ranks agree."""
    cls = type(value)
    found: dict[str, Any] = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    said = None
    if attribute(value, "describe") is not None:
        said = described(value, "the grad_hook is described by its public attributes")
    if said is not None:
        found["describe"] = dict(said)
    elif value is not sync:  # the sync's: its rank (refused every job), its step and timings
        found["settings"] = {k: _plain(v) for k, v in public_attributes(value).items()}
    return found


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` where it is a plain one (None, a bool, a number, a string, a tuple of them, a
    class, a function or module by its name); else its type's name (``"<list>"``), whatever
    it holds."""
    if value is None or isinstance(value, (str, bool, numbers.Real)):
        return value
    if isinstance(value, tuple) and depth < 8:
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, type):
        return f"<class {value.__module__}.{value.__qualname__}>"
    return code_name(value) or f"<{type(value).__qualname__}>"
