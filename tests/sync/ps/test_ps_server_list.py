"""The worker built by hand (``PServerSync(pservers=...)``, ``create_sync("pserver", ...)``)
refuses a shard listed twice, as ``detect_runtime`` refuses it in ``--pservers`` and
``DISTCONV_PSERVERS`` (0b4525d): it connected twice to one shard, and setup stopped at the
hello, in words about shard numbers ("set up as {'shard': 0, ...}, this worker expects
{'shard': 1, ...}"), where a job of two shards was meant."""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker

from distconv.optim import SGD
from distconv.sync.ps.client import PServerSync


@pytest.mark.parametrize(
    "servers, repeat",
    [
        (["127.0.0.1:5555", "127.0.0.1:05555"], "'127.0.0.1:05555' repeats '127.0.0.1:5555'"),
        (["[::1]:7", "h:1", "[::1]:7"], r"'\[::1\]:7' repeats '\[::1\]:7'"),
    ],
)
@pytest.mark.timeout(30)
def test_a_shard_listed_twice_is_refused_before_any_socket(servers, repeat):
    with pytest.raises(ValueError, match=rf"^pservers: {repeat}$"):
        insecure_worker(servers).close()  # close: a sync built without the refusal


@pytest.mark.parametrize("servers", ["127.0.0.1:5555", "", []])
@pytest.mark.timeout(30)
def test_a_server_list_that_is_one_string_or_empty_is_refused_naming_it(servers):
    """A str (``pservers="h:5555"``, as --pservers is written) was read a character at a time:
    "expected HOST:PORT, got '1'", naming none of what was given."""
    with pytest.raises(ValueError, match=r"^pservers must list one HOST:PORT or more, got "):
        PServerSync(SGD(0.1), rank=0, world_size=1, pservers=servers, insecure=True).close()
