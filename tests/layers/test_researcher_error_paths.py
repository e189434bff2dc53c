"""A layer of one's own failing in ways the base's error paths must name right: how to fix a
repeated base ``__init__``, whose error a C callback's is, a ``ValueError`` subclass still
catchable by its type, the feed blamed by identity, a dataclass layer run by hand."""

import pytest

from tests.layers.test_researcher_base_init import BaseTwice


def test_a_second_base_init_says_how_to_fix_it():
    """The message "BaseTwice: a second Layer.__init__ drops [...]" said what went wrong, not what
    to write instead: pass act= on through the parent's __init__, calling the base once."""
    with pytest.raises(TypeError, match=r"drops \['w', 'b'\]; call it once, before new_param") as e:
        BaseTwice(3)
    assert "super().__init__(..., act=...)" in str(e.value)
