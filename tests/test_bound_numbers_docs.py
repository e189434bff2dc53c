"""The numbers the docs give for the probe port's bounds, a shard's scrape, an MPIJob's rendered
timeout, the rank ports and the transport check are the code's: each sentence quoted here is
built from the constant it states, so a constant changed without its sentence fails here
(``tests/deploy/test_probe_limits.py`` holds the cap and the deadline)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from distconv import probe_http
from distconv.deploy import mpi_timeouts
from distconv.deploy.pod import HEALTH_PORT
from distconv.equivalence import TOLERANCE
from distconv.rank_processes import GRACE
from distconv.sync.ps import server, stats_series
from distconv.sync.ps.async_updates import TOP_STALENESS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _text(name: str) -> str:
    return " ".join((DOCS / name).read_text().split())


def test_the_probe_port_bounds_the_operations_guide_gives():
    text = _text("operations.md")
    queue = probe_http.ProbeHTTPServer.request_queue_size
    assert f"a new connection waits up to {probe_http.SLOT_SECONDS:g} s for one" in text
    assert f"The kernel holds up to {queue} connections waiting to be accepted" in text


def test_a_shards_scrape_waits_as_the_operations_guide_says():
    text = _text("operations.md")
    assert f"an idle shard's loop turns every {server.TICK:g} s" in text
    wait = f"{stats_series.WAIT_SECONDS:g} s"
    assert f"does not turn within {wait}" in text and f"after those {wait}" in text
    top = f"{TOP_STALENESS}+"
    assert (
        f'where `--max-staleness` is above {TOP_STALENESS} the last is `staleness="{top}"`' in text
    )


def test_the_mpijob_timeout_share_and_rank_ports_kubernetes_md_gives():
    text = _text("kubernetes.md")
    share = Fraction(mpi_timeouts.TIMEOUT_SHARE).limit_denominator(10)
    assert f"{share.numerator}/{share.denominator} of the `--stall-seconds` they give" in text
    stall = 300
    assert f"`--stall-seconds {stall} --timeout {float(stall * share):g}`" in text
    assert f"`-- --stall-seconds 900` renders `--timeout {float(900 * share):g}`" in text
    slots = 65535 - HEALTH_PORT + 1
    assert f"`--slots-per-worker` past {slots}, where a rank's port would pass 65535" in text
    assert f"at {share} of the stall limit" in _text("operations.md")


def test_the_transport_checks_numbers_architecture_md_gives():
    text = _text("architecture.md")
    assert f"to {TOLERANCE:g} of each parameter's largest value in float64" in text
    assert f"every rank that failed within {GRACE:g} s of the first" in text
