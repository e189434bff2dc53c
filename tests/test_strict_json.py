"""NaN and infinities in what distconv writes as JSON (``metrics.jsonl``, ``--log-format json``
lines) are ``null``: the bare ``NaN`` that ``json.dumps`` writes is refused by every strict
parser (JavaScript, Go, jq, log collectors), the whole line with it."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from distconv.data import Dataset, split, synthetic
from distconv.init import set_seed
from distconv.logs import JsonFormatter, as_log_line
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync import create_sync
from distconv.trainer import Trainer


def _strict(line: str) -> dict:
    """``line`` parsed as strict JSON parsers do: a NaN or Infinity token is refused."""

    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    return json.loads(line, parse_constant=refuse)


@pytest.mark.timeout(60)
def test_a_test_loss_past_the_float_range_is_null_in_metrics_jsonl(tmp_path):
    train, test = split(synthetic(n=320, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
    huge = Dataset(np.full_like(test.x, 3e38), test.y, test.num_classes, "test")  # finite
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
    trainer = Trainer(net, sync, 16, out_dir=tmp_path / "run", progress=False)
    with np.errstate(all="ignore"):
        history = trainer.fit(train, huge, epochs=1)
    assert not np.isfinite(history[0]["test_loss"])  # the sums overflowed
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    record = _strict(lines[0])
    assert record["test_loss"] is None and record["train_loss"] == history[0]["train_loss"]
    assert (tmp_path / "run" / "metrics.png").is_file()


def test_a_json_log_line_holding_nan_or_infinity_is_strict_json():
    record = logging.LogRecord("distconv", logging.INFO, __file__, 0, "done", None, None)
    record.fields = {"test_loss": float("nan"), "rates": [1.0, float("inf"), -float("inf")]}
    entry = _strict(JsonFormatter().format(record))
    assert (entry["test_loss"], entry["rates"]) == (None, [1.0, None, None])
    root = logging.getLogger()
    handlers = list(root.handlers)
    for handler in handlers:  # a line written before the log is set up (a flag it never got)
        root.removeHandler(handler)
    try:
        line = as_log_line("done", fmt="json", test_loss=float("inf"))
    finally:
        for handler in handlers:
            root.addHandler(handler)
    assert _strict(line)["test_loss"] is None
