"""A worker reports ``HOSTNAME`` to the shards, and a shard refuses a hello whose host is not
printable or over 255 characters. An env file of CRLF lines (``docker
--env-file``, a ConfigMap edited on Windows) sets ``HOSTNAME=node1\\r``: such a worker was
refused at setup for a name it only reports. It now sends the name without the whitespace
around it, or the system's name where ``HOSTNAME`` is no host name. Real shard."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter
from distconv.sync.ps import config


@pytest.mark.timeout(60)
@pytest.mark.parametrize("env", ["node1\r", " node1\n", "x" * 300, "a\tb"])
def test_a_worker_with_a_stray_hostname_joins(shards, monkeypatch, env):
    (endpoint,) = shards.start(1, workers=1)  # the shard's own HOSTNAME is the usual
    monkeypatch.setenv("HOSTNAME", env)
    sync = insecure_worker([endpoint], timeout=10)
    try:
        sync.setup([Parameter("w", np.zeros(3))], {})  # refused: "(not printable)", before
    finally:
        sync.close()
    expected = env.strip() if len(env) < 100 and "\t" not in env else config.pysocket.gethostname()
    assert config.hostname() == expected
