"""The JSON text of what JSON has no form for (:mod:`distconv.plain_json`), shared by the job
check, the recorded sync scheme and the layers' settings."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from distconv import plain_json
from distconv.layers import settings


def test_the_layers_take_an_address_out_with_the_one_pattern_of_a_module_below_both():
    """layers/settings.py kept a copy of the address pattern, as the layers must not import
    distconv.sync where it lived: two copies to keep alike. The shared module imports nothing
    of distconv, so any tier may import it."""
    assert settings.ADDRESS is plain_json.ADDRESS
    lock = threading.Lock()
    assert (
        settings.setting_value(lock) == plain_json.plain(lock) == "<unlocked _thread.lock object>"
    )
    tree = ast.parse(Path(plain_json.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.split(".")[0] == "distconv"]
