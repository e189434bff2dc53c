"""What a checkpoint must agree on with the run that resumes it, and how a difference is told:
the run's facts (:class:`~distconv.resume.StepCheckpoints`) against those the checkpoint
records, each side as a checkpoint's ``extra`` reads back
(:func:`~distconv.checkpoint_checks.as_saved`).
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from distconv.cast_advice import dtype_only_advice
from distconv.checkpoint import Checkpoint, CheckpointError, check_fit
from distconv.checkpoint_checks import OWN_KEYS, whole_set_each_step
from distconv.global_batch_words import global_batch_clause
from distconv.parameter import Parameter
from distconv.scheme_history import WORLD_SIZE
from distconv.sync.description import first_differing

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
    "layers",
)
#: the network's structure (:meth:`~distconv.network.Network.structure`: each layer's type,
#: inputs and settings), the one fact compared by its first difference (``layers.mix.act``)
LAYERS = "layers"
#: the key of a checkpoint's ``extra`` that says in which form its facts are written, and the
#: forms this distconv reads, oldest first: numbers no Real with their type (``{"class":
#: "Decimal", "text": "0.1"}``); then the network's structure too, under :data:`LAYERS`; then
#: the world size too (:data:`~distconv.scheme_history.WORLD_SIZE`). Every form a distconv
#: wrote stays listed: one dropped when the next was added made its checkpoints older than
#: the first, their layers neither read nor compared. A
#: checkpoint without one of them was written before, maybe by text alone (``"0.1"``), and is
#: compared in that form too (:func:`_older_form`); one with one only as written, so a fact
#: that held the string ``"0.1"`` never agrees with a run that now holds ``Decimal("0.1")``.
#: An older distconv ignores the key (it reads the ``extra`` keys it knows). Each form is a text
#: no older checkpoint's own ``facts_form`` (a config's key of that name) holds by chance.
FACTS_FORM_KEY = "facts_form"
FACTS_FORMS = (
    "distconv: numbers with their types",
    "distconv: numbers with their types; the network's layers",
    "distconv: numbers with their types; the network's layers and the world size",
)
#: the form this distconv writes
FACTS_FORM = FACTS_FORMS[-1]
#: the facts a checkpoint records from a form on: in one of an earlier form, a key of that name
#: is its config's own (``config=vars(args)`` of a ``--layers`` flag), never compared as the fact
SINCE_FORM = {LAYERS: FACTS_FORMS[1], WORLD_SIZE: FACTS_FORMS[2]}
#: the run's facts beside the config's own entries that a resume lets change without a word:
#: the epochs asked for (a resume asks for more), the resume mode (``fit``'s ``resume``, which
#: a ``config=vars(args)`` of the scripts' ``--resume`` holds: False, then True on the resume),
#: and the Trainer's own that split the global batch otherwise (which is compared) or put
#: checkpoints elsewhere
MAY_CHANGE = ("epochs", "resume", "batch_size", "accumulate", "checkpoint_every")
#: a checkpoint's value for a fact it does not know: older checkpoints lack some facts, or
#: recorded the dtype as "None" (the one asked for, not the network's); these resume as before
UNKNOWN = (None, "None")


def check_resumable(
    ckpt: Checkpoint,
    params: Sequence[Parameter],
    theirs: Mapping[str, Any],
    ours: Mapping[str, Any],
) -> None:
    """Refuse a checkpoint that does not fit the model (:func:`~distconv.checkpoint.check_fit`)
    or comes from another run (:func:`check_same_run`; ``theirs``, ``ours``: its facts).

    Where it does not fit, the run's facts that differ are said instead where there are any:
    they name the cause (another ``--dtype`` as ``dtype: checkpoint 'float32', this run
    'float64'``, not a clause per parameter; another ``--data`` as the data set, not fc2's
    shape); else (an older checkpoint, a model of one's own) the parameters that differ.
    The facts' refusal then says too that the parameters do not fit, and how many differences
    there are (its ``__cause__`` lists them): a fact that differs for a reason of its own (a
    model of one's own resized, and another learning rate) said alone hid the misfit, and its
    advice to load the weights into a new run failed on it. Where they differ in dtype alone,
    either refusal says instead how to load them all the same: cast, restore, then train with
    ``Trainer(dtype=...)`` (:func:`~distconv.cast_advice.dtype_only_advice`).

    Raises:
        CheckpointError: as those two do.
    """
    try:
        check_fit(ckpt, params)
    except CheckpointError as misfit:
        cast = dtype_only_advice(params, ckpt.params)  # the load advised would be refused too
        try:
            check_same_run(ckpt.path, theirs, ours)
        except CheckpointError as other_run:
            raise CheckpointError(f"{other_run}{cast or _nor_fits(misfit)}") from misfit
        raise  # check_fit's words say the cast too, where it is dtype alone
    check_same_run(ckpt.path, theirs, ours)


def _nor_fits(misfit: CheckpointError) -> str:
    """The sentence that ends a refusal of another run whose parameters do not fit either
    (``misfit``: :func:`~distconv.checkpoint.check_fit`'s, one clause per difference)."""
    listed = str(misfit).partition(" does not fit the model: ")[2]
    count = len(listed.split("; ")) if listed else 0
    differences = f"{count} difference{'' if count == 1 else 's'}" if count else "differences"
    return (
        f" Its parameters do not fit this model either ({differences} in name, shape or dtype; "
        "DISTCONV_DEBUG=1 lists them): they load only into a model built as the checkpoint's."
    )


def check_same_run(path: Any, theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> None:
    """Refuse to resume the checkpoint at ``path`` whose facts ``theirs`` differ from this
    run's ``ours`` in one of :data:`MUST_MATCH`; a global batch of another size passes where
    each step trains on the whole set either way (said at info level).

    Raises:
        CheckpointError: the checkpoint comes from a run whose seed, global batch, optimizer,
            learning-rate decay, dtype, data set (its name, or the training set's fingerprint)
            or model (``model``; the network's structure: :func:`layer_differences`) differ.
            A fact the checkpoint or this run does not record (:data:`UNKNOWN`, or not in the
            checkpoint's form: :func:`recorded`) is not compared.
    """
    facts, batch_passes = _differing(theirs, ours)
    if batch_passes:  # each step trains on the whole set either way
        log.info(
            "resuming with global batch %s, the checkpoint's %s: both reach the %s training "
            "examples, so each epoch is still one step of all of them",
            ours["global_batch"],
            theirs["global_batch"],
            ours["train_data"]["examples"],
        )
    differ = run_differences(theirs, ours)
    if differ:
        batch = global_batch_clause(theirs, ours) if "global_batch" in facts else ""
        model = layer_differences(recorded(theirs, LAYERS), ours.get(LAYERS))
        way_out = MODEL_CHANGED + SCRIPT_LOAD if model else new_run_advice(path)
        raise CheckpointError(
            f"checkpoint {path} comes from a different run; resuming would not reproduce it "
            f"({'; '.join(differ)}).{batch}{way_out}"
        )


def run_differences(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> list[str]:
    """The settings in which a checkpoint's facts ``theirs`` differ from this run's ``ours``, as
    :func:`check_same_run` refuses them (``optimizer.lr: checkpoint 0.001, this run 0.01``), the
    network's first difference last; empty where none does. Logs nothing (not resuming)."""
    facts, _ = _differing(theirs, ours)
    said = [said for k in facts for said in _differences(k, theirs[k], ours[k])]
    return said + layer_differences(recorded(theirs, LAYERS), ours.get(LAYERS))


def _differing(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> tuple[list[str], bool]:
    """The facts of :data:`MUST_MATCH` but the layers that differ, and whether a global batch of
    another size passed, each step training on the whole set either way."""
    older = theirs.get(FACTS_FORM_KEY) not in FACTS_FORMS  # written maybe by text alone
    pairs = [(k, theirs.get(k), ours.get(k)) for k in MUST_MATCH if k != LAYERS]
    facts = [k for k, a, b in pairs if _known(a) and _known(b) and not _same(a, b, older)]
    passes = "global_batch" in facts and whole_set_each_step(theirs, ours)
    return [k for k in facts if not (passes and k == "global_batch")], passes


#: how a script starts a new run from a checkpoint's weights
SCRIPT_LOAD = (
    " To train on from these weights otherwise (other data: fine-tuning), start a new run and "
    "load them first (distconv.checkpoint.restore_checkpoint)."
)


def new_run_advice(path: Any) -> str:
    """How a refusal of another run's settings says to go on from the checkpoint at ``path``
    with this run's: a new run that takes its weights alone, from the command line
    (``--init-from``, in another ``--out``: ``--overwrite`` would delete them) or a script."""
    return (
        f" To start a new run from these weights with this run's settings (step 0, fresh "
        f"optimizer state and schedule), pass --init-from {path} and another --out; in a "
        "script, load them first (distconv.checkpoint.restore_checkpoint)."
    )


#: how a refusal of another model (:func:`layer_differences`) says to go on: the same
#: directory holds the checkpoint's run, which only its own model continues
MODEL_CHANGED = (
    " To resume, build the model as the checkpoint's (its extra['layers']); to train this "
    "model instead, start it in another output directory (out_dir, --out), or replace the run "
    "(resume='overwrite', --overwrite)."
)


def warn_of_config_changes(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> None:
    """Warn, in one line, of each config entry whose value differs between the checkpoint's
    facts ``theirs`` and this run's ``ours``: a script's own entries are recorded, never
    compared, and an entry may change the model or the training (a ``--act`` flag the model
    reads) where a resume must go on all the same (a ``config=vars(args)`` whose harmless flags
    change). Not warned of: what :func:`check_same_run` compares, the checkpoint's own facts
    (:data:`~distconv.checkpoint_checks.OWN_KEYS`), :data:`MAY_CHANGE`, and an entry one side
    has and the other has not (a flag a script added since)."""
    older = theirs.get(FACTS_FORM_KEY) not in FACTS_FORMS
    quiet = {*MUST_MATCH, *OWN_KEYS, *MAY_CHANGE}
    changed = [
        k for k in theirs if k in ours and k not in quiet and not _same(theirs[k], ours[k], older)
    ]
    if changed:
        log.warning(
            "resuming with config entries other than the checkpoint's (%s): a resume compares "
            "none of a script's own config, so the run goes on; where one of them changes the "
            "model or the training, start a new run in another output directory instead",
            "; ".join(said for k in changed for said in _differences(k, theirs[k], ours[k])),
        )


def recorded(extra: Mapping[str, Any], key: str) -> Any:
    """The fact ``key`` of a checkpoint's ``extra``; None where the checkpoint's form is older
    than the one that records it (:data:`SINCE_FORM`): a key of that name was its config's."""
    form = extra.get(FACTS_FORM_KEY)
    since = SINCE_FORM.get(key)
    if since is not None and not (form in FACTS_FORMS and form_order(form) >= form_order(since)):
        return None
    return extra.get(key)


def form_order(form: str) -> int:
    """Where ``form`` stands among :data:`FACTS_FORMS`, oldest first."""
    return FACTS_FORMS.index(form)


def layer_differences(theirs: Any, ours: Any) -> list[str]:
    """The first difference between the checkpoint's network structure and this run's
    (``layers.mix.act: checkpoint 'tanh', this run 'relu'``), or none where either records
    none. Each layer's entries are compared where both hold them, at every depth
    (:func:`_both_hold`): a later distconv whose layers record another setting (a key more in
    a layer's :meth:`~distconv.layers.base.Layer.settings`, or in a spec's) still resumes an
    earlier one's checkpoint, and another type, other inputs or another value of a setting both
    record is refused. A layer one side has and the other has not is another model, unless
    it is one the other side has under another name (:func:`_renamed_alike`). A function's
    first line is not compared (:func:`_unlocated`)."""
    if not isinstance(theirs, Mapping) or not isinstance(ours, Mapping):
        return []
    theirs, ours = _unlocated(dict(theirs)), _unlocated(dict(ours))
    for name in theirs.keys() & ours.keys():
        theirs[name], ours[name] = _both_hold(theirs[name], ours[name])
    found = first_differing(theirs, ours, f"{LAYERS}.")
    if found is None or _renamed_alike(theirs, ours):
        return []
    where, before, now = found
    return [f"{where}: checkpoint {before!r}, this run {now!r}"]


def _renamed_alike(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
    """Whether two structures are one model up to the names of the layers one of them has and
    the other has not: each such layer of the checkpoint's paired with the one layer of this
    run's that has its type and settings, and every layer's inputs renamed so, the two are
    equal. A layer renamed (a loss ``loss`` now ``mse``, a pool) computes what it did; a
    layer with parameters renamed renames them, which the parameters' check refuses first.
    Names both sides hold are never paired anew: two layers that swapped names are still
    refused, and so is a pairing that is not the only one."""
    gone, new = theirs.keys() - ours.keys(), ours.keys() - theirs.keys()
    if not gone or len(gone) != len(new):
        return False
    layers = [*theirs.values(), *ours.values()]
    if not all(isinstance(v, Mapping) and isinstance(v.get("inputs"), list) for v in layers):
        return False
    pairs = {}
    for name in gone:
        alike = [n for n in new if _settings_text(ours[n]) == _settings_text(theirs[name])]
        if len(alike) != 1:
            return False
        pairs[name] = alike[0]
    if len(set(pairs.values())) != len(pairs):
        return False
    renamed = {
        pairs.get(name, name): {**layer, "inputs": [pairs.get(i, i) for i in layer["inputs"]]}
        for name, layer in theirs.items()
    }
    return _text(renamed) == _text(ours)


def _settings_text(layer: Mapping[str, Any]) -> str:
    """A layer's type and settings, its inputs left out, as JSON text."""
    return _text({k: v for k, v in layer.items() if k != "inputs"})


#: where a setting's function is written with its first line (a lambda, a function made in a
#: call: :func:`~distconv.plain_names.code_name`), that line: ``<function m.<lambda> line 12>``
_CODE_LINE = re.compile(r"(<(?:cy)?function \S+) line [0-9]+>")


def _unlocated(fact: Any) -> Any:
    """``fact`` (a network's structure) with each function's first line left out of its text
    (:data:`_CODE_LINE`): the line locates the code, and a script edited above it (an import
    added) moved it, so the same model was refused as another. The job check compares the
    line across ranks, which run one source; a resume runs the script as it is now. What the
    function holds (its defaults, its cells) is still compared."""
    if isinstance(fact, str):
        return _CODE_LINE.sub(r"\1>", fact)
    if isinstance(fact, list):
        return [_unlocated(v) for v in fact]
    if isinstance(fact, Mapping):
        return {_unlocated(k): _unlocated(v) for k, v in fact.items()}
    return fact


def _both_hold(theirs: Any, ours: Any) -> tuple[Any, Any]:
    """``theirs`` and ``ours`` with each mapping in them cut to the keys both hold, down every
    mapping and every list of one length; anything else as it is."""
    if isinstance(theirs, Mapping) and isinstance(ours, Mapping):
        pairs = {k: _both_hold(v, ours[k]) for k, v in theirs.items() if k in ours}
        return {k: a for k, (a, _) in pairs.items()}, {k: b for k, (_, b) in pairs.items()}
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        pairs_ = [_both_hold(a, b) for a, b in zip(theirs, ours)]
        return [a for a, _ in pairs_], [b for _, b in pairs_]
    return theirs, ours


def _differences(name: str, theirs: Any, ours: Any) -> list[str]:
    """How a fact differs: by its entries where both are records of the same fields (a data
    set's length, feeds and sample digest), else as a whole (another optimizer's settings). An
    entry is the same where its JSON text is (:func:`_text`): a NaN is never ``==`` itself."""
    if isinstance(theirs, dict) and isinstance(ours, dict) and theirs.keys() == ours.keys():
        return [
            f"{name}.{k}: checkpoint {theirs[k]!r}, this run {ours[k]!r}"
            for k in theirs
            if theirs[k] != ours[k] and _text(theirs[k]) != _text(ours[k])
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
    return theirs == ours or _text(theirs) == _text(ours) or (older and theirs == _older_form(ours))


def _text(fact: Any) -> str:
    """``fact`` as JSON text, keys sorted: a NaN is the NaN it was, where ``==`` of a bare
    float NaN (a config's ``--clip nan``) is never true."""
    return json.dumps(fact, sort_keys=True)


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
