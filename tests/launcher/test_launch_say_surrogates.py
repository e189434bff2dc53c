"""A launcher message holding a lone surrogate (a rank's reason naming a path that is no UTF-8,
``/data/\\xff`` read with surrogateescape and written as ``\\udcff`` in its JSON line) is
written with the surrogate escaped: ``str.encode()`` raised UnicodeEncodeError there, past the
handler for OSError, and the launcher ended on a traceback with no failure headline."""

from __future__ import annotations

import io

import pytest

from launcher.supervisor import Supervisor


@pytest.mark.timeout(30)
def test_a_message_with_a_lone_surrogate_is_written_escaped(tmp_path):
    err = io.BytesIO()
    sup = Supervisor(tmp_path / "run", out=io.BytesIO(), err=err)
    path = b"/data/\xff".decode(errors="surrogateescape")
    sup.say(f"worker 1 failed: SyncError: cannot read {path}", level="error")
    assert (
        err.getvalue()
        == b"distconv-launch: worker 1 failed: SyncError: cannot read /data/\\udcff\n"
    )
