"""How to load a checkpoint's weights into a model that differs from them in dtype alone (a
float64 run's weights, a model now trained in float32): a checkpoint is never cast as it loads
(that would go on with another computation than the one checkpointed), so both a resume and
``restore_checkpoint`` refuse the model as it is, and the way through is the user's cast.

Without these words the resume's advice ("start a new run and load them first
(distconv.checkpoint.restore_checkpoint)") led to a second refusal ("model dtype float32,
checkpoint dtype float64") that did not say the cast converts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from distconv.checkpoint_checks import native
from distconv.parameter import Parameter


def dtype_only_advice(params: Sequence[Parameter], theirs: Mapping[str, Any]) -> str:
    """The sentence that says how to load ``theirs`` (a checkpoint's arrays by name) into the
    model of ``params``, where the two differ in dtype alone: the same names (each one
    parameter's) and shapes, every array of one side in one dtype, the two dtypes different.
    Empty where anything else differs (a name, a shape, mixed dtypes): no cast makes them fit.
    """
    distinct = list({id(p): p for p in params}.values())  # one listed twice is one, as in setup
    ours = {p.name: p.value for p in distinct}
    if not ours or len(ours) != len(distinct) or ours.keys() != theirs.keys():
        return ""
    if any(tuple(v.shape) != tuple(theirs[k].shape) for k, v in ours.items()):
        return ""
    model = {native(v.dtype) for v in ours.values()}
    saved = {native(v.dtype) for v in theirs.values()}
    if len(model) != 1 or len(saved) != 1 or model == saved:
        return ""
    (model_type,), (saved_type,) = model, saved
    return (
        f" Its parameters differ from this model's in dtype alone ({saved_type}, this model "
        f"{model_type}): to train this model on from them, cast this model's parameters to "
        f"{saved_type} first (p.cast({saved_type.name!r}) for each), load them "
        f"(distconv.checkpoint.restore_checkpoint), then train with "
        f"Trainer(dtype={model_type.name!r}), which casts them back, in another output "
        "directory (out_dir, --out)."
    )
