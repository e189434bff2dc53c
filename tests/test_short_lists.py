"""A long list said short (:func:`distconv.short_lists.short_list`): the first few named, the
rest counted, exact at the edges (none, one, exactly as many as are named, one more) in each
form the messages use."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.equivalence import model
from distconv.files import delete_files
from distconv.optim import create_optimizer
from distconv.run_dir import RunDirectory, RunDirError
from distconv.short_lists import short_list
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from launcher.shown import shown
from tests.launcher.launch_cli import launch


@pytest.mark.parametrize(
    "items, said",
    [
        ([], ""),
        (["a"], "a"),
        (["a", "b", "c"], "a, b, c"),
        (["a", "b", "c", "d"], "a, b, c and 1 more"),
        (["a", "b", "c", "d", "e"], "a, b, c and 2 more"),
    ],
)
def test_the_first_are_named_and_the_rest_counted(items, said):
    assert short_list(items, 3) == said


@pytest.mark.parametrize(
    "items, said",
    [
        ([], ""),
        (["a"], "a"),
        (["a", "b"], "a or b"),
        (["a", "b", "c"], "a, b or c"),
        (["a", "b", "c", "d"], "a, b, c or 1 more"),
    ],
)
def test_a_choice_joins_its_last_two_and_its_count_by_or(items, said):
    assert short_list(items, 3, choice=True) == said


@pytest.mark.parametrize(
    "items, said",
    [
        ([], ""),
        (["x"], "x"),
        (["x", "y"], "x (and 1 more)"),
        (["x", "y", "z"], "x (and 2 more)"),
    ],
)
def test_the_bracketed_count_follows_the_first(items, said):
    assert short_list(items, 1, bracketed=True) == said


def test_the_items_may_be_joined_by_a_word_and_written_by_str():
    names = ["'w'", "'b'", "'g'", "'h'"]
    either = {"separator": " or ", "bracketed": True}
    assert short_list(names[:3], 3, **either) == "'w' or 'b' or 'g'"
    assert short_list(names, 3, **either) == "'w' or 'b' or 'g' (and 1 more)"
    errors = [OSError(13, "Permission denied"), OSError(21, "Is a directory")]
    assert short_list(errors, 1, bracketed=True) == "[Errno 13] Permission denied (and 1 more)"


@pytest.mark.parametrize(
    "places, said",
    [
        (["f0:1"], "f0:1"),
        (["f0:1", "f1:1"], "f0:1, f1:1"),
        (["f0:1", "f1:1", "f2:1"], "f0:1, f1:1 and 1 more document"),
        (["f0:1", "f1:1", "f2:1", "f3:1"], "f0:1, f1:1 and 2 more documents"),
    ],
)
def test_the_count_takes_its_noun_one_or_many(places, said):
    assert short_list(places, 2, noun="document") == said


def test_items_too_many_to_hold_are_counted_beyond_those_given():
    pods = [f"pod-{i}" for i in range(5)]
    assert short_list(pods, 5, separator="; ", more=99999995) == (
        "pod-0; pod-1; pod-2; pod-3; pod-4 and 99999995 more"
    )
    assert short_list(pods, 5, more=0) == "pod-0, pod-1, pod-2, pod-3, pod-4"
    assert short_list(["'a,b'"], 1, more=1) == "'a,b' and 1 more"
    assert short_list([], 3, more=2, noun="document") == "2 more documents"


def test_ranges_are_counted_without_being_listed_whole():
    assert short_list(range(10**12), 2) == "0, 1 and 999999999998 more"


@pytest.mark.parametrize(
    "most, more, cause",
    [
        (0, 0, "most must be 1 or more, got 0"),
        (2, -1, "more, the count beyond the items, must be 0 or more, got -1"),
    ],
)
def test_a_count_that_cannot_be_said_is_refused_by_its_cause(most, more, cause):
    with pytest.raises(ValueError, match=cause):
        short_list(["a", "b"], most, more=more)


# Each message that says a list short, on real files: its words as they were before the list
# was said through short_list (the other messages' own tests pin theirs).


def test_a_run_directory_names_three_foreign_files_then_counts_the_rest(tmp_path: Path):
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    for name in "abcde":
        (checkpoints / f"{name}.txt").write_text("mine\n")
    with pytest.raises(RunDirError) as refused:
        RunDirectory(tmp_path).clear_unfinished()
    named = ", ".join(str(checkpoints / f"{name}.txt") for name in "abc")
    assert f"leaves ({named} and 2 more), which" in str(refused.value), refused.value
    for name in "de":
        (checkpoints / f"{name}.txt").unlink()
    with pytest.raises(RunDirError) as refused:
        RunDirectory(tmp_path).clear_unfinished()
    assert f"leaves ({named}), which" in str(refused.value), refused.value


def test_files_that_cannot_be_deleted_are_one_warning_naming_the_first(tmp_path: Path, caplog):
    taken = [tmp_path / name for name in ("a", "b", "c")]
    for path in taken:
        path.mkdir()  # a name taken by a directory: unlink refuses it
    log = logging.getLogger("distconv.test_short_lists")
    with caplog.at_level(logging.WARNING, logger=log.name):
        assert delete_files(taken, log, "not deleted: %s") == []
        assert delete_files(taken[:1], log, "not deleted: %s") == []
    first = f"not deleted: [Errno {errno.EISDIR}] Is a directory: '{taken[0]}'"
    assert [r.getMessage() for r in caplog.records] == [f"{first} (and 2 more)", first]


def test_a_write_into_many_held_gradients_names_three_then_counts_the_rest():
    """A write whose line cannot be read (run by ``exec``, as from a REPL or compiled code) is
    blamed on every gradient the step holds, here the 8 of a small LeNet: three named, with
    ``or``, then the rest counted in brackets."""
    net = model(0)
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((8, 1, 8, 8)), rng.integers(0, 4, size=8)
    with pytest.raises(SyncError) as refused:
        with LocalSync(create_optimizer("sgd", lr=0.05)) as sync:
            sync.setup(net.parameters(), {"batch": 8})
            sync.start_step(len(y))
            net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)})
            net.backward(sync, loss="loss", loss_scale=len(y))
            exec("grad[...] = 0", {"grad": net.parameters()[0].grad})
            sync.finish_step()  # not reached
    said = "the gradient of 'fc2.bias' or 'fc2.weight' or 'fc1.bias' (and 5 more) was written"
    assert str(refused.value).startswith(said), refused.value


@pytest.mark.timeout(60)
def test_a_launch_names_three_run_directories_then_counts_the_rest(tmp_path: Path):
    runs = tmp_path / "runs"
    for when, name in enumerate(("A1", "B2", "C3", "D4", "E5"), start=1):
        checkpoints = runs / name / "train" / "checkpoints"
        checkpoints.mkdir(parents=True)
        (checkpoints / "step-00000012.json").write_text("{}")  # a checkpoint's manifest
        os.utime(checkpoints, (when * 1_000_000, when * 1_000_000))
    done = launch("local", "--workers", "1", "--servers", "0", "--", "--resume", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    said = f"{shown(runs)} holds 'E5', 'D4', 'C3' and 2 more (newest first)"
    assert said in done.stderr, done.stderr
