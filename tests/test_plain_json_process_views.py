"""How :mod:`distconv.plain_json` writes ``sys.modules`` and ``vars(sys)`` reached through a
read-only proxy or a dict view: as process state, by name, as the dicts themselves are."""

from __future__ import annotations

import json
import os
import sys
import types
import weakref

from distconv import plain_json
from distconv.layers import settings


def test_a_proxy_or_view_of_sys_modules_is_written_by_name_not_walked(monkeypatch):
    """``types.MappingProxyType(sys.modules)`` was walked in full (some 15 kB: every module
    the rank imported), and ``sys.modules.keys()``, ``.values()``, ``.items()`` were written by
    their text, which lists each module: another on a rank that imported others first, so
    ranks that agree were refused. Each is the process's own, written by what it shows."""
    held = {
        "proxy": types.MappingProxyType(sys.modules),
        "keys": sys.modules.keys(),
        "values": sys.modules.values(),
        "items": sys.modules.items(),
        "proxy_of_vars": types.MappingProxyType(types.MappingProxyType(vars(sys))),
        "lookup": types.MappingProxyType(sys.modules).get,
    }
    before = plain_json.dumps(held)
    monkeypatch.setitem(sys.modules, "_k622_imported_later", types.ModuleType("later"))
    assert plain_json.dumps(held) == before
    written = json.loads(before)
    assert {k: v for k, v in written.items() if k != "lookup"} == {
        "proxy": "mappingproxy(sys.modules)",
        "keys": "sys.modules.keys()",
        "values": "sys.modules.values()",
        "items": "sys.modules.items()",
        "proxy_of_vars": "mappingproxy(mappingproxy(vars(sys)))",
    }
    assert written["lookup"]["fields"]["self"] == "mappingproxy(sys.modules)"
    assert settings.setting_value(sys.modules.keys()) == "sys.modules.keys()"
    assert settings.setting_value(types.MappingProxyType(sys.modules)) == (
        "mappingproxy(sys.modules)"
    )


def test_a_proxy_or_view_of_another_dict_is_written_by_what_it_holds():
    """Only the process's dicts are named: a proxy of a config's own dict is walked, and a
    view of one keeps its text, as before."""
    table = {"a": 1}
    written = json.loads(plain_json.dumps([types.MappingProxyType(table), table.keys()]))
    assert written == [{"a": 1}, "dict_keys(['a'])"]
    assert not plain_json.is_process_state(table.values())


def test_a_proxy_or_view_of_os_environ_is_written_by_name_not_walked(monkeypatch):
    """``types.MappingProxyType(os.environ)`` was walked, and ``os.environ.keys()``,
    ``.values()``, ``.items()`` (a Mapping's views, not a dict's) were written by their text:
    each rank wrote its whole environment (its rank, host, paths) and was refused. One rule for
    every mapping of the process's own: its proxy or view is written by what it shows. A copy
    (``os.environ.copy()``, ``dict(sys.modules)``) is a dict of the config's, walked."""
    held = {
        "proxy": types.MappingProxyType(os.environ),
        "keys": os.environ.keys(),
        "values": os.environ.values(),
        "items": os.environ.items(),
        "proxy_keys": types.MappingProxyType(os.environ).keys(),
        "proxy_of_weak": types.MappingProxyType(weakref.WeakValueDictionary()),
    }
    before = plain_json.dumps(held)
    monkeypatch.setenv("K629_ANOTHER_RANK", "1")
    assert plain_json.dumps(held) == before
    assert json.loads(before) == {
        "proxy": "mappingproxy(_Environ)",
        "keys": "_Environ.keys()",
        "values": "_Environ.values()",
        "items": "_Environ.items()",
        "proxy_keys": "_Environ.keys()",
        "proxy_of_weak": "mappingproxy(WeakValueDictionary)",
    }
    assert settings.setting_value(types.MappingProxyType(os.environ)) == "mappingproxy(_Environ)"
    assert settings.setting_value(os.environ.items()) == "_Environ.items()"
    assert json.loads(plain_json.dumps({"a": "1"}.keys() | set())) == ["a"]  # not a view
