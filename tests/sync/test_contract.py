"""The sync contract as a transport of one's own, or a script, meets it (``docs/architecture.md``,
"The sync contract"): what ``SyncStrategy`` itself refuses, and ``LocalSync``'s step order."""

from __future__ import annotations

import pytest

from distconv.sync import create_sync
from distconv.sync.local import LocalSync


@pytest.mark.parametrize("optimizer", ["adam", None, {"name": "sgd", "lr": 0.1}])
def test_a_sync_refuses_an_optimizer_that_is_not_one(optimizer):
    """LocalSync('adam') was taken, and failed at the first setup with "'str' object has no
    attribute 'config'"."""
    with pytest.raises(TypeError, match=r"LocalSync needs an Optimizer, got .*create_optimizer"):
        LocalSync(optimizer)
    with pytest.raises(TypeError, match=r"LocalSync needs an Optimizer"):
        create_sync("local", optimizer=optimizer)
