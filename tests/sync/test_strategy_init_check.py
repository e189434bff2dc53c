"""SyncStrategy's check that a subclass's ``__init__`` called the base's names the class whose
``__init__`` skipped it (review k446)."""

from __future__ import annotations

import pytest

from tests.test_researcher_sync import Forgetful


class Careful(Forgetful):
    """Calls its parent's ``__init__``, as it should: the parent is the one that forgot."""

    def __init__(self, lr: float) -> None:
        super().__init__(lr)
        self.careful = True


def test_the_class_whose_init_skipped_the_base_s_is_named_not_its_subclass():
    """Making a Careful said "Careful.__init__ did not call super().__init__": Careful's does;
    Forgetful's, which it calls, does not."""
    with pytest.raises(
        TypeError, match=r"^Forgetful\.__init__ returned without calling super\(\)\.__init__"
    ):
        Careful(0.1)
