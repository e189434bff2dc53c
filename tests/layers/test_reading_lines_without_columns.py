"""Whose a layer's error is, where Python keeps no columns for the failing instruction
(Python 3.10; 3.11+ run with ``-X no_debug_ranges``): the failing line's statement is read
(``layers/line_statements.py``) and the checks diagnose as they do with columns; where no
line can be read at all, nothing is blamed and the layer's own error stands.

Before, each check took the unread line for a culprit on 3.10: a write into a read-only
array of the layer's own was "wrote into the gradient of 'ss1.bias' or 'ss1.weight'", the
layer's own int64 buffer was "input 'labels' holds int64 values", a None of its own was the
frozen weight's."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.layers.base import Layer, LayerError
from distconv.layers.line_statements import statement_at
from distconv.layers.source_spans import failing_span
from distconv.network import Network, NetworkError
from tests.child_env import REPO_ROOT, child_env
from tests.layer_mistakes import ScaleShift, build, local_run, trained_as

#: the checks' tests, run again in a child with no columns kept: each asserts the diagnosis
#: these lines give with columns
_CHECKS = (
    "tests/test_layer_firing.py",
    "tests/layers/test_reading_failing_lines.py",
    "tests/layers/test_researcher_error_paths.py",
    "tests/layers/test_researcher_feed_blame.py",
    "tests/layers/test_researcher_frozen_weights.py",
    "tests/layers/test_blame_runs_no_code.py",
    "tests/layers/test_reading_lines_of_scopes_and_calls.py",
)


def test_the_checks_diagnose_alike_where_python_keeps_no_columns():
    """``-X no_debug_ranges`` leaves every instruction's columns out, as Python 3.10 keeps
    none: 20 of these tests failed so, each with a wrong blame."""
    run = subprocess.run(
        [sys.executable, "-X", "no_debug_ranges", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + ["-p", "no:xdist", *_CHECKS],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def _innermost(exc: BaseException, code_name: str):
    """The traceback entry of the innermost error chained to ``exc`` that passed through a
    function named ``code_name``."""
    found = None
    while exc is not None:
        tb = exc.__traceback__
        while tb is not None:
            found = tb if tb.tb_frame.f_code.co_name == code_name else found
            tb = tb.tb_next
        exc = exc.__cause__ or exc.__context__
    return found


def test_a_late_write_s_line_is_read_as_its_statement():
    """The statement ``ScaleShift`` fails at, adding into the weight's gradient after firing
    it, read from the traceback's line: the one its columns give."""
    with pytest.raises(NetworkError) as caught:
        local_run("early")
    tb = _innermost(caught.value, "_backward")
    read = statement_at(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
    assert ast.unparse(read) == "self.weight.grad += (dz * x.value).sum(axis=0)"
    assert ast.dump(failing_span(tb)) == ast.dump(read)


@pytest.mark.parametrize(
    "source, line",
    [
        ("a = 1; b += a\n", 1),  # two statements: which failed, the line does not say
        ("if a:\n    b += 1\n", 1),  # a compound statement's header
        ("if a: b += 1\n", 1),  # its header, or its body
        ("try:\n    b = 1\nfinally:\n    c = 1\n", 3),  # the line of no statement
        ("def f(:\n", 1),  # no parse
    ],
)
def test_a_line_that_is_no_one_statement_s_alone_is_not_read(tmp_path, source, line):
    path = tmp_path / "own.py"
    path.write_text(source)
    assert statement_at(str(path), line) is None


def test_a_statement_over_several_lines_is_read_from_any_of_them(tmp_path):
    path = tmp_path / "own.py"
    path.write_text("x = 1\nself.w.grad += (\n    dz\n    * x\n)\ny = 2\n")
    assert [type(statement_at(str(path), n)).__name__ for n in range(1, 7)] == (
        ["Assign", "AugAssign", "AugAssign", "AugAssign", "AugAssign", "Assign"]
    )


def _built_at_run_time(source: str):
    """The function ``source`` defines, compiled from a string: no traceback can show its
    lines, with or without columns (a notebook's code run through exec, code generated)."""
    names = {"np": np, "ScaleShift": ScaleShift}
    exec(compile(textwrap.dedent(source), "<built at run time>", "exec"), names)
    return next(v for k, v in names.items() if k.startswith("built_"))


class ReadOnlyScratchBuilt(ScaleShift):
    """A correct ScaleShift that, after firing, writes into a read-only array of its own, in
    a line no traceback can show."""

    _backward = _built_at_run_time(
        """
        def built_backward(self, dz, callback):
            ScaleShift._backward(self, dz, callback)
            scratch = np.broadcast_to(np.zeros(dz.shape[1]), dz.shape)
            scratch[...] = dz
        """
    )


def test_a_write_no_line_shows_is_not_blamed_on_a_fired_gradient():
    """Every fired parameter was blamed where the failing line could not be read."""
    with pytest.raises(LayerError, match="read-only") as caught:
        trained_as(ReadOnlyScratchBuilt, "unread", build())
    assert "wrote into the gradient" not in str(caught.value), caught.value


class CountsOwnBuilt(Layer):
    """Writes floats into an int64 buffer of its own, in a line no traceback can show."""

    num_inputs = 2

    def __init__(self) -> None:
        super().__init__()
        self.seen = np.zeros(3, np.int64)

    _forward = _built_at_run_time(
        """
        def built_forward(self, x, labels):
            self.seen += x.value.sum(0)
            return x.value + labels.value
        """
    )


def test_a_write_no_line_shows_is_not_blamed_on_a_feed_of_its_dtype():
    """The int64 feed was blamed for numpy's refusal to write into the layer's own buffer."""
    net = Network()
    net.add("counts", CountsOwnBuilt(), inputs=["x", "labels"])
    feeds = {"x": Arg(np.ones((4, 3))), "labels": Arg(np.ones((4, 3), np.int64))}
    with pytest.raises(TypeError, match=r"^Cannot cast ufunc 'add' output") as caught:
        net.forward(feeds)
    assert type(caught.value) is not NetworkError, caught.value


def test_a_file_too_long_to_parse_at_an_error_is_not_read(tmp_path):
    """A generated module of megabytes on the failing path was parsed whole where the error was
    read (a 6 MB one took 6 s and 1 GB), and its tree kept: such a file is left unread."""
    path = tmp_path / "generated.py"
    path.write_text("".join(f"x{i} = {i} + 1\n" for i in range(120_000)))
    started = time.monotonic()
    assert statement_at(str(path), 5) is None
    assert time.monotonic() - started < 1.0
    short = tmp_path / "written.py"
    short.write_text("".join(f"x{i} = {i} + 1\n" for i in range(1_000)))
    assert ast.unparse(statement_at(str(short), 5)) == "x4 = 4 + 1"
