"""A child's output pump (copying its lines to the log, the tail and the launcher's output) is
a module of its own, :mod:`launcher.child_output`, mixed into :class:`launcher.child.Child`:
the methods the pump thread runs are the mixin's, still reached through ``Child``, and the
names importable from :mod:`launcher.child` before stay so."""

from __future__ import annotations

import launcher.child
import launcher.long_line
from launcher.child import Child
from launcher.child_output import ChildOutput


def test_the_pump_is_a_mixin_of_child_in_its_own_module():
    assert Child.__mro__ == (Child, ChildOutput, object)
    for name in ("_copy", "_copy_long", "_write"):
        assert name not in vars(Child), name
        assert getattr(Child, name) is vars(ChildOutput)[name]
    assert "_note_end" in vars(Child)  # the end's report: the child's, the pump calls it
    assert launcher.child.READ_PIECE is launcher.long_line.READ_PIECE
    assert launcher.child.continued_prefix is launcher.long_line.continued_prefix
