"""A test fixture: a ``SyncStrategy`` whose four abstract methods do nothing, for tests of
what the base does around them (its checks of rank and world size, its refusals)."""

from __future__ import annotations

from distconv.sync.base import SyncStrategy


class BareSync(SyncStrategy):
    """``on_gradient``, ``finish_step``, ``state_dict`` and ``load_state_dict`` as nothing."""

    def on_gradient(self, param):
        pass

    def finish_step(self):
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass
