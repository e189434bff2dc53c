"""What a checkpoint must agree on with the run that resumes it, and how a difference is told:
the run's facts (:class:`~distconv.resume.StepCheckpoints`) against those the checkpoint
records, each side as a checkpoint's ``extra`` reads back
(:func:`~distconv.checkpoint_checks.as_saved`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from distconv.checkpoint import CheckpointError
from distconv.checkpoint_checks import whole_set_each_step

log = logging.getLogger("distconv.resume")

#: what must match between a checkpoint and the run resuming it
MUST_MATCH = (
    "seed",
    "global_batch",
    "optimizer",
    "lr_decay",
    "dtype",
    "data",
    "model",
    "train_data",
)
#: the key of a checkpoint's ``extra`` that says in which form its facts are written, and the
#: form this distconv writes: a number no Real with its type (``{"class": "Decimal", "text":
#: "0.1"}``). A checkpoint without it was written before, maybe by text alone (``"0.1"``), and
#: is compared in that form too (:func:`_older_form`); one with it only as written, so a fact
#: that held the string ``"0.1"`` never agrees with a run that now holds ``Decimal("0.1")``.
#: An older distconv ignores the key (it reads the ``extra`` keys it knows). The form is a text
#: no older checkpoint's own ``facts_form`` (a config's key of that name) holds by chance.
FACTS_FORM_KEY, FACTS_FORM = "facts_form", "distconv: numbers with their types"
#: a checkpoint's value for a fact it does not know: older checkpoints lack some facts, or
#: recorded the dtype as "None" (the one asked for, not the network's); these resume as before
UNKNOWN = (None, "None")


def check_same_run(path: Any, theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> None:
    """Refuse to resume the checkpoint at ``path`` whose facts ``theirs`` differ from this
    run's ``ours`` in one of :data:`MUST_MATCH`; a global batch of another size passes where
    each step trains on the whole set either way (said at info level).

    Raises:
        CheckpointError: the checkpoint comes from a run whose seed, global batch, optimizer,
            learning-rate decay, dtype, data set (its name, or the training set's fingerprint)
            or model differ. A fact the checkpoint or this run does not record
            (:data:`UNKNOWN`) is not compared.
    """
    older = theirs.get(FACTS_FORM_KEY) != FACTS_FORM  # written maybe by text alone
    facts = [
        k
        for k in MUST_MATCH
        if _known(theirs.get(k))
        and _known(ours.get(k))
        and not _same(theirs.get(k), ours.get(k), older)
    ]
    if "global_batch" in facts and whole_set_each_step(theirs, ours):
        facts.remove("global_batch")  # each step trains on the whole set either way
        log.info(
            "resuming with global batch %s, the checkpoint's %s: both reach the %s training "
            "examples, so each epoch is still one step of all of them",
            ours["global_batch"],
            theirs["global_batch"],
            ours["train_data"]["examples"],
        )
    if facts:
        differ = [said for k in facts for said in _differences(k, theirs[k], ours[k])]
        batch = (
            " The global batch (world size x batch size x accumulate) must stay the same "
            "across a resume."
            if "global_batch" in facts
            else ""
        )
        raise CheckpointError(
            f"checkpoint {path} comes from a different run; resuming would not reproduce it "
            f"({'; '.join(differ)}).{batch} To train on from these weights otherwise (other "
            "data: fine-tuning), start a new run and load them first "
            "(distconv.checkpoint.restore_checkpoint)."
        )


def _differences(name: str, theirs: Any, ours: Any) -> list[str]:
    """How a fact differs: by its entries where both are records of the same fields (a data
    set's length, feeds and sample digest), else as a whole (another optimizer's settings)."""
    if isinstance(theirs, dict) and isinstance(ours, dict) and theirs.keys() == ours.keys():
        return [
            f"{name}.{k}: checkpoint {theirs[k]!r}, this run {ours[k]!r}"
            for k in theirs
            if theirs[k] != ours[k]
        ]
    return [f"{name}: checkpoint {theirs!r}, this run {ours!r}"]


#: the numbers written by their type beside their text (``{"class": "Decimal", "text": "0.1"}``),
#: which an older distconv wrote by their text alone (``"0.1"``): a number no Real, and a
#: Fraction (an ``lr_decay`` of ``Fraction(9, 10)`` was ``"9/10"``)
_TYPED_NUMBERS = frozenset({"Decimal", "complex", "Fraction"})


def _same(theirs: Any, ours: Any, older: bool) -> bool:
    """Whether the checkpoint's fact is this run's, as this distconv wrote it, or where the
    checkpoint is ``older`` (no :data:`FACTS_FORM_KEY`) as an older one did
    (:func:`_older_form`): a config's Decimal in ``data`` saved as ``"0.1"`` resumes."""
    return theirs == ours or (older and theirs == _older_form(ours))


def _older_form(fact: Any) -> Any:
    """``fact`` as distconv wrote it before numbers no Real carried their type: each
    ``{"class": "Decimal", "text": "0.1"}`` in it (:data:`_TYPED_NUMBERS`) as its text, a key
    too (its JSON text), with its type's name where another key has that text
    (``"0.1 (Decimal)"`` beside ``"0.1"``, as the job check names keys)."""
    if isinstance(fact, list):
        return [_older_form(v) for v in fact]
    if not isinstance(fact, dict):
        return fact
    if (number := _typed(fact)) is not None:
        return number[1]
    keys = {k: _typed(_json(k)) for k in fact}
    texts = Counter(found[1] if found else k for k, found in keys.items())
    older = {}
    for key, value in fact.items():
        if (found := keys[key]) is not None:
            kind, text = found
            key = text if texts[text] == 1 else f"{text} ({kind})"
        older[key] = _older_form(value)
    return older


def _typed(fact: Any) -> tuple[str, str] | None:
    """A typed number's class and text, or None where ``fact`` is none."""
    if isinstance(fact, dict) and fact.keys() == {"class", "text"}:
        if fact["class"] in _TYPED_NUMBERS and isinstance(fact["text"], str):
            return fact["class"], fact["text"]
    return None


def _json(key: str) -> Any:
    """The value a key's JSON text holds (a typed number's key), or None."""
    if not key.startswith("{"):
        return None
    try:
        return json.loads(key)
    except ValueError:
        return None


def _known(fact: Any) -> bool:
    """Whether both sides can be compared on ``fact`` (an API run records no data set)."""
    return fact not in UNKNOWN
