"""How :mod:`distconv.plain_json` writes values of the process (``sys.modules``) and values
JSON has no form for that are written by their text (a ``Decimal``)."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
import types

from distconv import plain_json


@dataclasses.dataclass
class _Lookup:
    """A config's part holding a lookup of its own choosing."""

    find: object


def test_sys_modules_and_its_methods_are_written_by_name_not_walked(monkeypatch):
    """``sys.modules.get`` (a bound built-in method) was walked as a bound method is, its
    object whole: every module the process imported, by name (kilobytes, another list on each
    rank that imported other modules first), so ranks that agree were refused. ``sys.modules``
    is the process's own state, written by its name as ``os.environ`` is by its type's."""
    held = [
        {"lookup": sys.modules.get},
        functools.partial(sys.modules.get, "numpy"),
        _Lookup(sys.modules.__contains__),
        _Lookup(sys.modules),
    ]
    before = plain_json.dumps(held)
    monkeypatch.setitem(sys.modules, "_k616_imported_later", types.ModuleType("later"))
    assert plain_json.dumps(held) == before
    assert len(before) < 600
    written = json.loads(before)
    assert written[0] == {
        "lookup": {
            "class": "builtin_function_or_method",
            "fields": {"func": "<built-in method builtins.dict.get>", "self": "sys.modules"},
        }
    }
    assert written[3] == {"class": "_Lookup", "fields": {"find": "sys.modules"}}
    assert plain_json.dumps(os.environ.get) != plain_json.dumps(sys.modules.get)
    assert plain_json.is_process_state(sys.modules)
    assert json.loads(plain_json.dumps({"modules": {"a": 1}})) == {"modules": {"a": 1}}
