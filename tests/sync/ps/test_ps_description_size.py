"""The start-up check of many workers whose model has many layers: the Trainer's description
carries each layer's structure (a few hundred bytes a layer), and a gather's reply holds every
rank's value, within one header frame; a hello carries a description over the header cap as
its digest alone. Real shard, workers in threads."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import pytest
from ps_helpers import (
    assert_equals_local_training,
    batches,
    insecure_worker,
    run_ranks,
    small_net,
    train_steps,
)

from distconv.layers import Conv2D
from distconv.network import Network
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.ps.wire import MAX_HEADER_BYTES

WORKERS, LAYERS = 12, 400
#: layers whose structure alone passes the header cap (about 280 bytes a layer)
OVER_CAP_LAYERS = 4000


def _deep_net() -> Network:
    net = Network()
    prev = "image"
    for i in range(LAYERS):
        net.add(f"conv{i}", Conv2D(1, 1, 3, padding=1, act="relu"), inputs=prev)
        prev = f"conv{i}"
    return net


@pytest.mark.timeout(120)
def test_many_workers_of_a_deep_model_pass_the_start_up_check(shards):
    nets = [_deep_net() for _ in range(WORKERS)]
    config = {"batch_size": 8, "layers": nets[0].structure()}
    endpoints = shards.start(1, WORKERS)

    def rank_fn(rank: int) -> None:
        sync = insecure_worker(endpoints, rank, WORKERS, block_bytes=1 << 16)
        try:
            sync.setup(nets[rank].parameters(), config)
            sync.all_equal({"data": "the same"})
            sync._say_bye()
        finally:
            sync._close_sockets()

    size = len(json.dumps(config)) * WORKERS
    assert size > MAX_HEADER_BYTES  # every rank's description would not fit one reply
    run_ranks(rank_fn, WORKERS)


@pytest.mark.timeout(120)
def test_many_workers_that_all_differ_are_told_so_not_a_malformed_reply(shards):
    """Every rank's description differs (a per-rank setting in what they compare): the
    second gather carried one description of each digest, every rank's, and its reply passed
    the cap too. Two are enough: the first rank's and the first unlike it."""
    nets = [_deep_net() for _ in range(WORKERS)]
    endpoints = shards.start(1, WORKERS)
    said: list = [None] * WORKERS

    def rank_fn(rank: int) -> None:
        sync = insecure_worker(endpoints, rank, WORKERS, block_bytes=1 << 16)
        try:
            sync.setup(nets[rank].parameters(), {"batch_size": 8})
            with pytest.raises(SyncError) as caught:
                sync.all_equal({"layers": nets[rank].structure(), "seed": rank})
            said[rank] = str(caught.value)
            sync._say_bye()
        finally:
            sync._close_sockets()

    assert len(json.dumps(nets[0].structure())) * WORKERS > MAX_HEADER_BYTES
    run_ranks(rank_fn, WORKERS)
    assert said[0] == "rank 0 and rank 1 run different jobs: seed: 0 here, 1 there"
    for rank in range(1, WORKERS):
        assert (
            said[rank] == f"rank {rank} and rank 0 run different jobs: seed: {rank} here, 0 there"
        )


def test_a_difference_is_named_from_the_descriptions_of_each_digest_s_first_rank():
    """Three ranks and a lost one (None): ranks 1 and 3 run batch 16. Each rank sends its
    description only when it is the first of its digest, and names the first rank unlike it."""
    from distconv.sync.base import SyncError
    from distconv.sync.description import digest
    from distconv.sync.ps.job_check import check_all_equal

    jobs = [{"batch": 8}, {"batch": 16}, {"batch": 8}, {"batch": 16}, None]
    digests = [None if j is None else digest(j) for j in jobs]
    sent = {0: json.dumps(jobs[0]), 1: json.dumps(jobs[1])}  # the first of each digest
    texts = [sent.get(r) for r in range(len(jobs))]
    for rank in range(4):
        asked: list = []

        def gather(kind: str, value, asked=asked):
            asked.append(value)
            return digests if len(asked) == 1 else texts

        with pytest.raises(SyncError) as caught:
            check_all_equal(gather, rank, jobs[rank])
        other = 1 if jobs[rank]["batch"] == 8 else 0
        mine, theirs = jobs[rank]["batch"], jobs[other]["batch"]
        assert str(caught.value) == (
            f"rank {rank} and rank {other} run different jobs: batch: {mine} here, {theirs} there"
        )
        assert asked[1] == sent.get(rank)  # only the first rank of a digest sends its text
    asked = []
    check_all_equal(lambda kind, v: asked.append(v) or [digest({"a": 1}), None], 0, {"a": 1})
    assert len(asked) == 1  # alike: one gather, of the digest


def _over_cap_config(kernel: int = 3) -> dict:
    """A Trainer-like config whose ``layers`` (a chain of convolutions, as a deep model's
    structure) pass the header cap: cheap, with no layer built but one."""
    settings = {"type": "Conv2D"} | Conv2D(1, 1, kernel, padding=1, act="relu").settings()
    layers = {f"conv{i}": {**settings, "inputs": [f"conv{i - 1}"]} for i in range(OVER_CAP_LAYERS)}
    config = {"batch_size": 8, "layers": layers}
    assert len(json.dumps(config)) > MAX_HEADER_BYTES
    return config


def _setup_two(endpoints: list[str], configs: list[dict], train: bool) -> list:
    """Ranks 0 and 1 set up the small net with ``configs[rank]`` (and, with ``train``, train
    two steps); each rank's net, or the SyncError that stopped it."""
    nets = [small_net(seed=rank) for rank in range(2)]  # built here: one global generator
    data = batches(2, 8)

    def rank_fn(rank: int):
        sync = insecure_worker(endpoints, rank, 2, timeout=5)
        try:
            sync.setup(nets[rank].parameters(), configs[rank])
            if train:
                train_steps(nets[rank], sync, data, rank, 2)
            return nets[rank]
        except SyncError as exc:
            return exc
        finally:
            sync.close()

    return run_ranks(rank_fn, 2, timeout=60)


@pytest.mark.timeout(60)
def test_a_job_whose_description_passes_the_header_cap_says_hello_and_trains(shards):
    """The hello carried the whole description, past the cap: the shard could not read it,
    and the workers only heard that their hello went unanswered."""
    config = _over_cap_config()
    results = _setup_two(shards.start(1, 2), [config, config], train=True)
    for net in results:
        assert not isinstance(net, Exception), net
        assert_equals_local_training(net, batches(2, 8))


def _refusal(results: list) -> str:
    """The one rank's refused hello: the other rank's hello came first (either may). (The
    other rank, left waiting, names it too, in other words: not its hello's refusal.)"""
    refused = [
        str(r) for r in results if re.match(r"rank \d, hello: .* run different jobs", str(r))
    ]
    assert len(refused) == 1, results
    return refused[0]


@pytest.mark.timeout(60)
def test_two_ranks_whose_large_entries_differ_are_told_which_by_its_digests(shards):
    configs = [_over_cap_config(3), _over_cap_config(5)]
    message = _refusal(_setup_two(shards.start(1, 2), configs, train=False))
    assert "run different jobs: config.layers: digest " in message, message
    assert "(too large for a hello to carry, so what in it differs cannot be named" in message
    assert len(set(re.findall(r"\b[0-9a-f]{16}\b", message))) == 2, message  # both, unlike


@pytest.mark.timeout(60)
def test_two_ranks_with_large_descriptions_are_told_a_small_difference_by_value(shards):
    """Protocol 5 sent such a description as its digest alone: the refusal could not say
    that only the batch size differed."""
    configs = [_over_cap_config(), {**_over_cap_config(), "batch_size": 16}]
    message = _refusal(_setup_two(shards.start(1, 2), configs, train=False))
    assert re.search(
        r"run different jobs: config\.batch_size: (8 here, 16|16 here, 8) there \(here: ", message
    ), message


@pytest.mark.timeout(60)
def test_two_ranks_whose_small_descriptions_differ_are_told_the_first_difference(shards):
    configs = [{"batch_size": 8}, {"batch_size": 16}]
    message = _refusal(_setup_two(shards.start(1, 2), configs, train=False))
    assert re.search(r"config\.batch_size: (8 here, 16|16 here, 8) there \(here: ", message), (
        message
    )


@pytest.mark.timeout(60)
def test_a_header_over_the_cap_is_refused_by_the_worker_at_once(shards):
    """The shard can neither read it nor say whose it is: the worker waited out its timeout,
    then said only that the request went unanswered."""
    (endpoint,) = shards.start(1, 1)
    sync = insecure_worker([endpoint], timeout=20)
    try:
        sync.setup(small_net().parameters())
        began = time.monotonic()
        with pytest.raises(SyncError, match=r"a gather header of \d+ bytes, more than the"):
            sync.allreduce_sum([0.5] * (MAX_HEADER_BYTES // 8))
        assert time.monotonic() - began < 5
        assert sync.allreduce_sum([0.5]) == [0.5]  # nothing was sent: the worker goes on
    finally:
        sync.close()


@pytest.mark.timeout(120)
def test_a_model_of_too_many_parameters_stops_at_the_seed_naming_its_header(shards):
    """Every seed part lists every parameter (docs/protocol.md, seed): some 25,000 of them
    pass the 1 MiB header cap. The hello still fits (its description travels in part), and
    rank 0 stops at the seed at once, with the size, instead of waiting out its timeout."""
    params = [Parameter(f"layer{i}.weight", np.zeros(2, np.float32)) for i in range(25_000)]
    sync = insecure_worker(shards.start(1, 1), timeout=60, block_bytes=1 << 20)
    try:
        began = time.monotonic()
        with pytest.raises(SyncError, match=r"a seed header of \d+ bytes, more than the 1048576"):
            sync.setup(params)
        assert time.monotonic() - began < 50  # raised before sending, not after the timeout
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_two_ranks_whose_models_differ_in_parameter_count_alone_are_told_the_counts(shards):
    """The parameters agree as far as the shorter list goes: the refusal names the counts.
    The hello's cut of the two values once looked for them in a sentence that quoted none,
    and the shard failed on that rank's hello with a bare unpacking error."""
    endpoints = shards.start(1, 2)
    models = [
        [Parameter(f"w{i}", np.zeros(3, np.float32)) for i in range(count)] for count in (2, 3)
    ]

    def rank_fn(rank: int):
        sync = insecure_worker(endpoints, rank, 2, timeout=5)
        try:
            sync.setup(models[rank], {"batch_size": 8})
        except SyncError as exc:
            return exc
        finally:
            sync.close()

    message = _refusal(run_ranks(rank_fn, 2, timeout=60))
    assert re.search(r"parameter count: (2 here, 3|3 here, 2) there \(here: ", message), message
