"""What a layer computes besides its parameters, in values every rank writes alike: the
settings two ranks of one job must agree on (:meth:`~distconv.layers.base.Layer.settings`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distconv.plain_json import (
    ADDRESS,
    dumps,
    fields_of,
    is_array,
    is_process_state,
    key_names,
    plain,
)
from distconv.plain_names import call_fields, code_name
from distconv.plain_state import is_process_dict, state_name


def _is_frozen_dataclass(value: Any) -> bool:
    params = getattr(type(value), "__dataclass_params__", None)
    return params is not None and params.frozen


def part_settings(part: Any) -> dict[str, Any] | None:
    """A layer part's (a projection's, an operator's) type and what it computes besides its
    parameter: each public setting of plain JSON values (an offset, slices, a scale) and each
    frozen dataclass (a convolution's spec), as :meth:`Layer.settings`; None for None."""
    if part is None:
        return None
    return {"type": type(part).__name__} | public_settings(part, plain=True, skip=("owner", "key"))


def public_settings(obj: Any, *, plain: bool, skip: Sequence[str] = ()) -> dict[str, Any]:
    """``obj``'s public frozen dataclasses as dicts and (``plain``) its plain JSON values."""
    found: dict[str, Any] = {}
    for key, value in sorted(vars(obj).items()):
        if key.startswith("_") or key in skip:
            continue
        if _is_frozen_dataclass(value) or (plain and _is_plain(value)):
            found[key] = setting_value(value)
    return found


def _is_plain(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_is_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, np.generic))


def setting_value(value: Any) -> Any:
    """``value`` in terms every process of a job writes alike, for :meth:`Layer.settings`:
    dataclasses as dicts (the fields their repr shows), a set as a list sorted as the job
    check sorts one, any mapping as a dict, its keys as the job check names them
    (:func:`~distconv.plain_json.key_names`: ``1`` beside ``"1"`` is ``"1 (int)"``), a numpy
    scalar as its Python number, an array (numpy's, cupy's, a torch tensor) as the job check
    writes it (:func:`~distconv.plain_json.plain`: its dtype, shape and a hash of its
    values), a class as where it is defined, a function, a closure, a bound method or a
    module as the job check writes it (:func:`~distconv.plain_names.code_name`,
    :func:`~distconv.plain_names.call_fields`: its cells, defaults, object), an object whose
    class has no str or repr of its own as the job check writes it (its class's name and its
    attributes: :func:`~distconv.plain_json.fields_of`), a thread, a lock, an open file or
    ``os.environ`` by its type's name (:func:`~distconv.plain_json.is_process_state`),
    ``sys.modules`` and ``vars(sys)`` by those names (walked, every module the rank imported,
    its argv), and
    any other object as its repr less its memory address, which differs from process to
    process (two ranks of one job would disagree)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # the fields its repr shows, as the job check writes one (a repr=False field holds
        # the process's own: a pid, a log path), an init=False field never set left out
        return {name: setting_value(v) for name, v in (fields_of(value) or {}).items()}
    if isinstance(value, (tuple, list)):
        items = [setting_value(v) for v in value]
        # a namedtuple takes its fields one by one, as dataclasses.asdict builds it
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if (
        isinstance(value, Mapping)
        and not is_process_dict(value)
        and (type(value) is dict or not is_process_state(value))
    ):
        # a dict is process state only as sys.modules or vars(sys) (by name below; os.environ:
        # its type's name); a MappingProxyType is walked too, not its repr (a set in hash order)
        names = key_names(value)  # as the job check names them: 1 beside "1" kept apart
        return {names[k]: setting_value(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):  # its repr: in hash order, another on each rank
        return [setting_value(v) for v in plain(value)]  # sorted as the job check sorts it
    if isinstance(value, np.generic):
        return value.item()
    if is_array(value):  # a cupy array, a torch tensor too: neither imported here
        return plain(value)  # its repr summarises one of over 1000 elements: two masks alike
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if code_name(value) is not None or call_fields(value) is not None:
        # a function, a closure, a built-in, a bound method, a partial, a module: as the job
        # check writes it (one reading), not by its qualified name alone (two lambdas, two
        # closures of one factory, two objects' bound methods agreed)
        return json.loads(dumps(value))
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', None)}.{value.__qualname__}"
    if is_process_state(value):  # a thread's ident, a lock's state: its process's alone
        return state_name(value)  # sys.modules by that name, as the job check writes it
    if fields_of(value) is not None:  # no text of its own: its repr named its class alone
        return json.loads(dumps(value))  # its class's name and its fields, as the job check's
    return ADDRESS.sub("", repr(value))
