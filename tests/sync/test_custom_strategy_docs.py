"""What ``SyncStrategy``'s docstring tells a strategy of one's own to implement is what Python
asks of it: it named ``on_gradient`` and ``finish_step`` alone, and a class written from it could
not be made ("Can't instantiate abstract class ... state_dict, load_state_dict")."""

from __future__ import annotations

import re

from distconv.sync.base import SyncStrategy


def test_the_docstring_names_every_method_a_subclass_must_implement():
    said = SyncStrategy.__doc__.split("Args:")[0]
    sentence = re.search(r"Subclasses implement (.*?)\(abstract", said, re.S)
    assert sentence is not None, said
    named = set(re.findall(r":meth:`(\w+)`", sentence.group(1)))
    assert named == set(SyncStrategy.__abstractmethods__)
