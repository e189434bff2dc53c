"""Blank values of ``distconv pserver``'s flags, as an unset variable passes them
(``--keys "$KEYS"``): each is refused naming the flag, not read as another mistake."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.child_env import child_path


def pserver(*extra: str, timeout: float = 20) -> subprocess.CompletedProcess:
    """``distconv pserver`` on 127.0.0.1 port 0, one shard of one worker, with ``extra``."""
    cmd = [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0", "--shard",
           "0", "--num-shards", "1", "--workers", "1", *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": child_path()}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_keys_directory_is_a_usage_error(blank, tmp_path):
    """``--keys ""`` was read as no --keys: 'CURVE is on by default: pass --keys DIR', of a
    --keys the user had passed, and ``--keys "  "`` looked for ``  /server.key_secret``
    (d250bc32 fixed the same for distconv train)."""
    done = pserver("--keys", blank, "--checkpoint-dir", str(tmp_path / "parts"))
    assert done.returncode == 2, done
    assert "argument --keys: must not be empty" in done.stderr
    assert "pass --keys DIR" not in done.stderr and "key_secret" not in done.stderr
    assert not (tmp_path / "parts").exists()
