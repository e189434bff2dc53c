"""What a test reads off a running ``distconv train`` process's health port."""

from __future__ import annotations

import re
import urllib.request

SAMPLES = re.compile(rb"^distconv_samples_total\{[^}]*\} ([0-9.e+]+)", re.MULTILINE)


def trained_samples(port: int) -> float:
    """Examples the worker has trained, from /metrics; -1 while it does not answer yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            found = SAMPLES.search(reply.read())
    except OSError:
        return -1
    return float(found.group(1)) if found else -1
