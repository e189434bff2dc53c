"""``distconv check-manifests`` on counts the API server holds as int32 (replicas, parallelism,
slotsPerWorker...): a count past int32 is the one problem, the largest int32 is taken, and a
huge replica count is judged without listing each shard."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distconv.deploy.counts import count, counted, known_count
from tests.deploy.test_check_manifests_command import EXAMPLES, in_a_child
from tests.deploy.test_counts import MPI, PSERVER, _problems_with

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("kind", "field"),
    [("StatefulSet", "replicas"), ("Job", "completions"), ("Job", "parallelism")],
)
@pytest.mark.parametrize("value", [2**31, 10**26, 3e9])
def test_a_count_past_int32_is_the_one_problem(kind, field, value):
    """The API server stores each count as an int32 and refuses ``completions:
    99999999999999999999999999``: it passed with no problem, and was compared with the flags
    as if it were the count (``--num-shards 2 but the StatefulSet has ... replicas``)."""
    name = {"StatefulSet": "ps-pserver", "Job": "ps-worker"}[kind]
    problems = _problems_with(PSERVER, kind, (field,), value)
    assert problems == [
        f"{kind} {name}: {field} must be at most 2147483647 (an int32), got {value!r}"
    ]


_PAST_INT32 = "must be at most 2147483647 (an int32)"


@pytest.mark.parametrize(("value", "taken"), [(2**31 - 1, True), (2**31, False)])
def test_the_largest_int32_count_is_taken_and_the_next_by_no_check(value, taken):
    """2147483647 itself is a count the API server takes: no problem about its range, and each
    reader of a count (count, known_count, counted) takes it. 2147483648 is named once and
    taken by none (count gave it to the probe-port check, which echoed it). It only guarded the
    boundary before, passing whatever any reader took."""
    problems = _problems_with(PSERVER, "Job", ("parallelism",), value)
    ranged = [p for p in problems if "int32" in p or "must be an integer" in p]
    assert ranged == ([] if taken else [f"Job ps-worker: parallelism {_PAST_INT32}, got {value}"])
    spec = {"parallelism": value}
    read = (count(spec, "parallelism", 1), known_count(spec, "parallelism", 1))
    expected = ((value, value), True) if taken else ((1, None), False)
    assert (read, counted(spec, "parallelism")) == expected


@pytest.mark.parametrize("value", [2**31, 10**26, 3e9])
def test_a_slots_per_worker_past_int32_is_the_one_problem(value):
    """68b02462 named a count past int32 and kept it from the checks that read it with
    ``known_count``, but those that read it with ``count`` (the liveness probe's ports, the
    ranks a pod runs) still echoed it: ``the ranks listen on 8080-100000000000000000000008079
    (... 100000000000000000000000000 slots)``."""
    problems = _problems_with(MPI, "MPIJob", ("slotsPerWorker",), value)
    assert problems == [
        f"MPIJob pairs: slotsPerWorker must be at most 2147483647 (an int32), got {value!r}"
    ]


def test_a_huge_replica_count_is_judged_without_listing_each_shard(tmp_path):
    """``replicas: 1000000000`` (an int32 the API server takes) on the shards' StatefulSet is
    judged within 1 GiB in a moment: each shard's DNS name was listed first, 1e9 strings, so
    the command died of a MemoryError traceback (killed outright without a memory limit)."""
    folder = Path(shutil.copytree(EXAMPLES / "pserver", tmp_path / "pserver"))
    sts = folder / "statefulset-digits-ps-pserver.yaml"
    sts.write_text(sts.read_text().replace("replicas: 2\n", "replicas: 1000000000\n", 1))
    done = in_a_child("-m", "distconv", "check-manifests", str(folder), memory=1 << 30)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert (done.returncode, err) == (1, "")
    assert f"{sts}:2: StatefulSet digits-ps-pserver: --num-shards 2 but the StatefulSet" in out
