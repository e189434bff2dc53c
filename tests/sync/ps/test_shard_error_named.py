"""A shard's failure whose exception has no message names its type alone.

The shard formatted such failures ``Type: message``, so an exception without a message
(``AssertionError()``, a bare ``assert``) reached workers and logs as ``Type: `` with nothing
after it: the answer to a request no check foresaw, its log line, and the failure of a sync or
async update. :func:`distconv.messages.named` names the type alone there. The shard is a real
shard process whose handlers raise an exception without a message.
"""

from __future__ import annotations

import re

import pytest
from ps_helpers import batches, insecure_worker, shard_argv, small_net, train_steps

from distconv.sync.base import SyncError

#: ``python -m distconv`` whose stats requests (argv[1] ``stats``) or block updates
#: (``update``) raise an AssertionError without a message
FAILING_SHARD = """
import sys
from distconv.cli import main
from distconv.sync.ps.handlers import RequestHandlers
from distconv.sync.ps.state import BlockUpdates

def fail(*args, **kwargs):
    raise AssertionError()

if sys.argv.pop(1) == "stats":
    RequestHandlers._op_stats = fail
else:
    BlockUpdates._update = fail
raise SystemExit(main(sys.argv[1:]))
"""

#: the type named, then nothing or another word: not "AssertionError: "
ALONE = r"AssertionError(?!: )"


@pytest.mark.timeout(60)
def test_a_request_failing_without_a_message_is_answered_with_its_type(shards, tmp_path):
    log = tmp_path / "shard.log"
    endpoint = shards.launch(shard_argv(["-c", FAILING_SHARD, "stats"]), log)
    sync = insecure_worker([endpoint])
    said = []
    try:
        sync.setup(small_net().parameters())
        for _ in range(2):  # the second is logged in one line, not with its traceback
            with pytest.raises(SyncError) as refused:
                sync.shard_stats()
            said.append(str(refused.value))
    finally:
        sync.close()
    for message in said:
        assert re.search(rf"shard error: {ALONE}", message), message
    shards.stop()
    logged = log.read_text()
    assert re.search(rf"request 'stats' from .* failed: {ALONE}", logged), logged[-2000:]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_update_failing_without_a_message_names_its_type(shards, tmp_path, mode):
    endpoint = shards.launch(
        shard_argv(["-c", FAILING_SHARD, "update"], mode=mode), tmp_path / "shard.log"
    )
    net = small_net()
    sync = insecure_worker([endpoint])
    try:
        sync.setup(net.parameters())
        with pytest.raises(SyncError) as refused:
            train_steps(net, sync, batches(1, 8))
    finally:
        sync.close()
    said = str(refused.value)
    assert re.search(rf"failed on shard 0: {ALONE}", said), said
