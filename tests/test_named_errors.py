"""An exception named on one line: ``Type: message``, or ``Type`` alone where the message is
empty or blank, never a dangling ``Type:`` (``KeyboardInterrupt:``,
``AssertionError:`` in a worker's bye, a damaged manifest's reason; cuDNN's is in
tests/kernels/test_cudnn_switch.py)."""

from __future__ import annotations

import pytest

from distconv import run_dir
from distconv.messages import described, named


@pytest.mark.parametrize(
    "error, said",
    [
        (KeyboardInterrupt(), "KeyboardInterrupt"),
        (AssertionError(), "AssertionError"),
        (ValueError("  \n\t "), "ValueError"),
        (ValueError("bad\n  value"), "ValueError: bad value"),
        (KeyError("w"), "KeyError: 'w'"),
    ],
)
def test_an_error_is_named_with_its_message_or_alone(error, said):
    assert named(error) == said
    assert described(error) == said


def test_described_still_cuts_to_its_limit():
    assert described(ValueError("x" * 50), limit=20) == "ValueError: xxxxx..."


def test_a_manifest_that_fails_without_a_message_is_named_alone(tmp_path, monkeypatch):
    """A real run directory with one manifest whose parse raises an empty ValueError."""
    directory = run_dir.RunDirectory(tmp_path)
    directory.checkpoint_root.mkdir(parents=True)
    (directory.checkpoint_root / "step-00000001.json").write_text("{}")

    def parse(raw, path):
        raise ValueError()

    monkeypatch.setattr(run_dir.Manifest, "parse", staticmethod(parse))
    found, problems = directory.scan()
    assert found == []
    assert len(problems) == 1 and problems[0].endswith("is damaged (ValueError)"), problems
