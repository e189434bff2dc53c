"""A script of a transport of one's own, for ``distconv-launch local --servers 0``: rank GONE
leaves with exit GONE_STATUS (as a closed connection would tell the others), and every other
rank raises ``PeerFailed(..., ranks=[NAMED])`` through ``run_main``, as docs/architecture.md
("A strategy of your own") says a transport does where a peer is gone."""

from __future__ import annotations

import os
import sys
import time

from distconv.distributed import run_main
from distconv.sync.peers import PeerFailed


def main() -> None:
    gone, named = int(os.environ["GONE"]), int(os.environ["NAMED"])
    if int(os.environ["RANK"]) == gone:
        sys.exit(int(os.environ["GONE_STATUS"]))
    time.sleep(0.5)
    raise PeerFailed(f"own transport: rank {gone} closed the connection", ranks=[named])


if __name__ == "__main__":
    run_main(main)
